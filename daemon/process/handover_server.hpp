// The running daemon's side of a planned restart without systemd: it
// listens on a Unix socket (--handover-socket PATH, or the PATH a
// --takeover came through) for one new process at a time. The exchange
// (docs/restart.md):
//   new: "takeover" | "takeover force"
//   old: (parks every connection at a request boundary, flushes)
//        "state <json>" + listener and connection descriptors | "refused <why>"
//   new: "adopted" | "failed <why>"
//   old: "bye", and exits 0; on anything else, a timeout or EOF it serves on.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "daemon/session/accept_backoff.hpp"

namespace nbdsched::daemon {

class HandoverServer {
public:
    struct Hooks {
        // A new process asks: "" when the hand-over began (the server calls
        // send_state or fail later), else why it is refused.
        std::function<std::string(bool force)> begin;
        std::function<void(const std::string& why)> abort;   // it failed: serve on
        std::function<void()> done;                          // it took everything: exit
    };

    // `replace`: the file belongs to the process we took over from (remove
    // it); otherwise a live socket there is an error, a stale one is removed.
    // A file that is not a socket is an error and stays as it was.
    static std::unique_ptr<HandoverServer> open(boost::asio::io_context& io, const std::string& path, bool replace,
                                                Hooks hooks, std::string& error);
    ~HandoverServer();

    void start();
    // Everything is parked: pass it. The descriptors stay ours too.
    void send_state(const std::string& json, const std::vector<int>& fds);
    // The server could not get ready (drain timeout, flush error).
    void fail(const std::string& why);
    // `keep_file`: the next process listens on the path now.
    void close(bool keep_file = false);
    const std::string& path() const { return path_; }
    // Failed accepts (EMFILE...) since the last one that succeeded: each waits
    // its back-off before the next try (accept_backoff.hpp).
    std::uint64_t failed_accepts() const { return backoff_.failures(); }

private:
    HandoverServer(boost::asio::io_context& io, std::string path, Hooks hooks);
    void accept_next();
    void on_request();
    void wait_verdict();
    void end_peer();
    // Waits (asynchronously, at most `limit`) until the peer has something to read.
    void when_readable(std::chrono::milliseconds limit, std::function<void(bool readable)> then);

    boost::asio::local::stream_protocol::acceptor acceptor_;
    std::optional<boost::asio::local::stream_protocol::socket> peer_;
    boost::asio::steady_timer timer_;
    AcceptBackoff backoff_;   // the pause after a failed accept (EMFILE)
    std::string path_;
    Hooks hooks_;
    std::uint64_t generation_ = 0;   // which peer a pending wait belongs to
    bool closed_ = false;
    bool keep_file_ = false;
    bool bound_ = false;   // the file at path_ is ours to remove
};

}   // namespace nbdsched::daemon
