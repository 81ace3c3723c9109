// Accepting sockets: a unix socket (a stale socket file is removed first) or
// a TCP address. Accepted sockets come out as generic stream sockets, so a
// connection does not care which kind it is.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.hpp"
#include "daemon/session/accept_backoff.hpp"
#include "daemon/session/connection.hpp"

namespace nbdsched::daemon {

// A listen entry's tls: as what its connections do about STARTTLS.
nbd::TlsMode tls_mode_of(const config::Listen& where);

class Listener {
public:
    using Accept = std::function<void(Socket socket, std::string peer)>;

    // nullptr with `error` set when the address cannot be bound.
    static std::unique_ptr<Listener> open(boost::asio::io_context& io, const config::Listen& where,
                                          std::string& error);
    // Adopts an already listening socket: systemd socket activation
    // ("activated") or a planned restart's hand-over ("handed over").
    static std::unique_ptr<Listener> adopt(boost::asio::io_context& io, int fd, std::string& error,
                                           const std::string& origin = "activated");
    ~Listener();

    // Accepts until close(); out of descriptors or memory, it stops for a
    // back-off (accept_backoff.hpp) and serves on.
    void start(Accept on_accept);
    // Hand-over: stop accepting but keep the socket (connections wait in its
    // backlog for whichever process accepts next); resume_accepting() if it failed.
    void pause();
    void resume_accepting();
    // The socket now belongs to the next process: close() leaves its file.
    void release() { owns_path_ = false; }
    int native_handle();
    // Stops accepting; removes the unix socket file this listener created.
    void close();
    const std::string& describe() const { return description_; }
    // "nbd+unix:///NAME?socket=PATH" or "nbd://HOST:PORT/NAME".
    std::string uri(const std::string& export_name) const;
    bool is_unix() const { return unix_.has_value(); }
    const std::string& unix_path() const { return path_; }
    const std::string& tcp_host() const { return host_; }
    std::uint16_t tcp_port() const { return port_; }
    // What its connections do about STARTTLS (the listen entry's tls:).
    nbd::TlsMode tls_mode() const { return tls_mode_; }
    void set_tls_mode(nbd::TlsMode mode) { tls_mode_ = mode; }
    // Where it listens and its tls:, as a listen entry (no permissions, no
    // origin), to hold against the configuration's (config::same_endpoint,
    // config::insecure_listener).
    config::Listen as_listen() const;
    // A unix socket's file gets `where`'s mode/owner/group (a handed-over
    // one those of the new configuration); unset ones stay as they are.
    bool apply_permissions(const config::Listen& where, std::string& error) const;

private:
    explicit Listener(boost::asio::io_context& io);
    // open() without its catch: Asio's throwing calls may throw.
    static std::unique_ptr<Listener> open_or_throw(boost::asio::io_context& io, const config::Listen& where,
                                                   std::string& error);
    void accept_next();

    boost::asio::io_context& io_;
    std::optional<boost::asio::local::stream_protocol::acceptor> unix_;
    std::optional<boost::asio::ip::tcp::acceptor> tcp_;
    std::string description_;
    std::string path_;         // unix socket path
    bool owns_path_ = false;   // we created the file: remove it on close
    std::string host_;
    std::uint16_t port_ = 0;
    nbd::TlsMode tls_mode_ = nbd::TlsMode::off;
    Accept on_accept_;
    AcceptBackoff backoff_;
    std::uint64_t accepted_ = 0;
    bool closed_ = false;
    bool paused_ = false;
};

}   // namespace nbdsched::daemon
