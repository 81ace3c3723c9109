// Gives a burst's memory back once an event loop's demand has fallen.
// main.cpp keeps freed request buffers mapped (glibc's trim threshold) and
// each thread's buffer pool keeps up to 64 MiB per size class, so that busy
// periods reuse memory without page faults; without this, a daemon kept
// what its largest burst took for ever, even with its clients gone quiet
// (docs/data-path.md, memory).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>

namespace nbdsched::daemon {

class IdleMemoryRelease {
public:
    // Every `period`, on `io`'s thread: its pool keeps no more than the
    // most its requests held at once during the period, and when that
    // freed something or the demand fell by half, glibc returns its free
    // memory to the system (return_free_memory()).
    IdleMemoryRelease(boost::asio::io_context& io, std::chrono::milliseconds period);
    // Arms the first check; call before the loop runs or on its thread.
    void start();
    // On the loop's thread, or once no thread runs the loop.
    void stop();

    static constexpr std::chrono::milliseconds default_period{5000};

private:
    void check();

    boost::asio::steady_timer timer_;
    std::chrono::milliseconds period_;
    std::size_t last_peak_ = 0;
};

}   // namespace nbdsched::daemon
