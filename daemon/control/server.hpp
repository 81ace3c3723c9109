// The control socket: a unix stream socket (mode 0600: whoever may use it
// may re-weight tenants) on the daemon's event loop. Each line read is a
// request handed to the handler; its reply goes back as one line.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <functional>
#include <memory>
#include <string>

#include "daemon/session/accept_backoff.hpp"

namespace nbdsched::daemon::control {

class ControlServer {
public:
    using Handler = std::function<std::string(const std::string& line)>;

    // nullptr and `error` when the socket cannot be created. A stale socket
    // file (nobody listening) is replaced; a live one, or a file that is not
    // a socket, is an error and stays as it was.
    static std::unique_ptr<ControlServer> open(boost::asio::io_context& io, const std::string& path, Handler handler,
                                               std::string& error);
    ~ControlServer();

    void start();
    // Stops accepting, ends open sessions and removes the socket file (the
    // one this server bound; nothing when its bind failed).
    void close();
    const std::string& path() const { return path_; }

private:
    class Session;
    ControlServer(boost::asio::io_context& io, std::string path, Handler handler);
    void accept_next();

    boost::asio::local::stream_protocol::acceptor acceptor_;
    std::string path_;
    Handler handler_;
    std::shared_ptr<bool> closed_;   // sessions check it before touching the handler
    AcceptBackoff backoff_;          // out of descriptors: accept again later, not in a loop
    bool bound_ = false;             // the file at path_ is ours to remove
};

}   // namespace nbdsched::daemon::control
