// Runs the event loop, optionally polling before it sleeps: after the last
// handler that did work, keep asking the reactor (epoll_wait with a zero
// timeout) for more before blocking in it, for as long as the policy says
// (busy_poll_policy.hpp). At one request at a time the next request often
// arrives within tens of microseconds of the reply, and catching it awake
// saves the wake-up of a sleeping (v)CPU. docs/data-path.md#busy-poll has
// the measurements and the CPU it costs. Or napping when it runs out of
// work (coalesce_policy.hpp): what comes meanwhile is served in one batch
// (docs/data-path.md#coalescing).
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstddef>
#include <cstdint>

#include "config/config.hpp"

namespace nbdsched::daemon {

struct LoopStats {
    std::uint64_t polls_with_work = 0;   // polls that found work (a sleep avoided)
    std::uint64_t sleeps = 0;            // blocked in epoll_wait (while `auto` pauses: turns that may have)
    std::uint64_t backoffs = 0;          // `auto` stopped polling: it did not pay
    std::uint64_t naps = 0;              // limits.coalesce: naps before waiting for work
    std::uint64_t nap_trials = 0;        // `auto` tried napping
    std::uint64_t naps_kept = 0;         // ... and napping paid
    std::uint64_t naps_lengthened = 0;   // ... and a longer nap paid more

    LoopStats& operator+=(const LoopStats& other);
};

// Runs the handlers of `io` that are ready, as io_context::poll() does, but
// no more than `most`; how many ran. poll() returns only once nothing is
// ready, and a client whose next request comes as fast as the loop answers
// the last keeps something ready: a loop that drained with it after a nap
// never napped again and answered one request a turn at a full core (fio at
// iodepth 64 over TCP, in about a quarter of its runs: 17-18 us of CPU per
// request where napping gives 4-10; docs/data-path.md#coalescing).
std::size_t run_ready(boost::asio::io_context& io, std::size_t most);

// Returns when `io` runs out of work or is stopped, as io_context::run() does.
void run_event_loop(boost::asio::io_context& io, const config::Limits& limits, LoopStats& stats);

}   // namespace nbdsched::daemon
