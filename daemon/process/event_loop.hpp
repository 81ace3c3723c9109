// Runs the event loop, optionally polling before it sleeps: after the last
// handler that did work, keep asking the reactor (epoll_wait with a zero
// timeout) for up to `busy_poll` before blocking in it. At one request at a
// time the next request often arrives within tens of microseconds of the
// reply, and catching it awake saves the wake-up of a sleeping (v)CPU.
// docs/busy-poll.md has the measurements and the CPU it costs.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <cstdint>

namespace nbdsched::daemon {

struct LoopStats {
    std::uint64_t polls_with_work = 0;   // polls that found work (a sleep avoided)
    std::uint64_t sleeps = 0;            // polls that ran out: blocked in epoll_wait
};

// Returns when `io` runs out of work or is stopped, as io_context::run() does.
void run_event_loop(boost::asio::io_context& io, std::chrono::microseconds busy_poll, LoopStats& stats);

}   // namespace nbdsched::daemon
