// The daemon's event loops (limits.threads, docs/threads.md). Loop 0 is the
// server's own io_context, run by the thread that calls Server::run(); the
// others run on threads of their own. Each device lives on one loop with its
// scheduler, timers and first connection; a device's further connections
// may go to other loops, and then the device is held while touched
// (daemon/device/device_lock.hpp).
//
// Loop 0 (listeners, handshakes, control socket, metrics, reload, signals,
// shutdown, hand-over) reaches into devices and connections of other loops
// only through exclusive(): every other loop stops at a handler boundary
// while it runs, which orders its reads and writes with theirs.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "daemon/process/event_loop.hpp"
#include "daemon/process/idle_memory.hpp"

namespace nbdsched::daemon {

class EventLoops {
public:
    // `count` loops in all (at least 1), `main` being loop 0.
    EventLoops(boost::asio::io_context& main, std::size_t count);
    ~EventLoops();
    EventLoops(const EventLoops&) = delete;
    EventLoops& operator=(const EventLoops&) = delete;

    std::size_t size() const { return extra_.size() + 1; }
    boost::asio::io_context& at(std::size_t index) { return index == 0 ? main_ : *extra_[index - 1]; }

    // Starts the threads of loops 1..N-1 (busy_poll and coalesce apply to
    // each), and on every loop the release of a burst's memory once it is quiet.
    void start(const config::Limits& limits);
    // Stops those loops and joins their threads; handlers still queued stay
    // queued until their io_context is destroyed. Loop 0's thread only.
    void stop();
    // Runs `f` on the calling thread (loop 0's) while every other loop waits
    // inside a handler posted to it; nested calls run `f` directly.
    void exclusive(const std::function<void()>& f);
    // The other loops' busy-poll and nap counts (after stop()).
    LoopStats stats() const;

    // Connection placement (docs/threads.md), loop 0's thread only. place():
    // the loop a connection entering transmission goes to, counted until
    // left(): the one serving the fewest, `home` (its device's) on a tie,
    // so a device's first connection stays at home and a second goes to
    // another loop when one is free; `home` itself when not `movable`.
    std::size_t place(std::size_t home, bool movable);
    void left(std::size_t loop);
    // The index of a loop of ours (0 for one that is not).
    std::size_t index_of(const boost::asio::io_context& io) const;

private:
    boost::asio::io_context& main_;
    std::vector<std::unique_ptr<boost::asio::io_context>> extra_;
    std::vector<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> guards_;
    std::vector<std::thread> threads_;
    std::vector<LoopStats> stats_;
    std::vector<std::unique_ptr<IdleMemoryRelease>> idle_memory_;   // one per loop, loop 0's first
    bool running_ = false;
    bool exclusive_ = false;
    std::vector<std::size_t> connections_;   // per loop: connections placed there
};

// How many loops a configuration gets: limits.threads (0: one per CPU), and
// one when TLS is configured (a TLS session cannot move to another loop).
// Without spread_connections, no more than there are devices (a loop
// without one would idle).
std::size_t event_loop_count(unsigned threads, std::size_t devices, bool tls, bool spread_connections);

}   // namespace nbdsched::daemon
