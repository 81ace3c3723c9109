// The control socket: a unix stream socket (mode 0600: whoever may use it
// may re-weight tenants) on the daemon's event loop. Each line read is a
// request handed to the handler; its reply goes back as one line. A
// connection is closed when it sends nothing for a while, and there are at
// most so many at once, so stuck or leaked clients cannot use up the
// daemon's descriptors (which its NBD clients need too).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "daemon/session/accept_backoff.hpp"

namespace nbdsched::daemon::control {

struct ControlLimits {
    std::size_t max_sessions = 64;                                      // more are answered with an error and closed
    std::chrono::milliseconds idle_timeout{std::chrono::seconds(30)};   // waiting for a request line
    std::size_t max_request = 1u << 20;                                 // bytes of one request line
};

class ControlServer {
public:
    using Handler = std::function<std::string(const std::string& line)>;
    using Limits = ControlLimits;

    // nullptr and `error` when the socket cannot be created. A stale socket
    // file (nobody listening) is replaced; a live one, or a file that is not
    // a socket, is an error and stays as it was.
    static std::unique_ptr<ControlServer> open(boost::asio::io_context& io, const std::string& path, Handler handler,
                                               std::string& error, Limits limits = {});
    ~ControlServer();

    void start();
    // Stops accepting, ends open sessions and removes the socket file (the
    // one this server bound; nothing when its bind failed).
    void close();
    const std::string& path() const { return path_; }

private:
    class Session;
    ControlServer(boost::asio::io_context& io, std::string path, Handler handler, Limits limits);
    void accept_next();
    void refuse(boost::asio::local::stream_protocol::socket socket);

    boost::asio::local::stream_protocol::acceptor acceptor_;
    std::string path_;
    Handler handler_;
    Limits limits_;
    std::shared_ptr<bool> closed_;                                               // sessions check it before touching the handler
    std::shared_ptr<std::size_t> sessions_ = std::make_shared<std::size_t>(0);   // open now
    std::size_t refused_ = 0;                                                    // since the cap was reached
    AcceptBackoff backoff_;                                                      // out of descriptors: accept again later, not in a loop
    bool bound_ = false;                                                         // the file at path_ is ours to remove
};

}   // namespace nbdsched::daemon::control
