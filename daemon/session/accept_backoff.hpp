// What an accept loop does when accept() fails for want of descriptors or
// memory (EMFILE, ENFILE, ENOBUFS, ENOMEM), or with another error that
// comes again at once (a security module refusing the accept, a socket that
// stopped listening: accept_backoff.cpp). The connection stays in the
// listening socket's backlog, so the socket stays readable and accepting
// again at once fails again at once: a loop at 100 % CPU writing a warning
// per try. Instead the loop stops accepting for a while (10 ms, doubling up
// to 1 s, from the first failure until an accept succeeds) and warns once
// per such episode; the event loop serves everything else meanwhile.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace nbdsched::daemon {

class AcceptBackoff {
public:
    static constexpr std::chrono::milliseconds first_delay{10};
    static constexpr std::chrono::milliseconds max_delay{1000};

    // `what` names the socket in the log ("unix:/run/nbdsched.sock").
    AcceptBackoff(boost::asio::io_context& io, std::string what);

    // True when `ec` is one of those errors: `retry` runs once the back-off
    // is over (never after cancel()). False: any other error, the caller's.
    bool wait_after(const boost::system::error_code& ec, std::function<void()> retry);
    // An accept succeeded: an episode ends, the next starts at 10 ms again.
    void accepted();
    // The socket stops accepting (paused, closed): a pending retry never runs.
    void cancel();
    void set_what(std::string what) { what_ = std::move(what); }
    std::uint64_t failures() const { return failures_; }         // in the current episode
    std::chrono::milliseconds delay() const { return delay_; }   // the current wait; 0 outside an episode

private:
    boost::asio::steady_timer timer_;
    std::string what_;
    std::chrono::milliseconds delay_{0};   // 0: not in an episode
    std::uint64_t failures_ = 0;
    std::chrono::steady_clock::time_point since_;
    std::uint64_t generation_ = 0;   // a retry queued before cancel() is stale
};

}   // namespace nbdsched::daemon
