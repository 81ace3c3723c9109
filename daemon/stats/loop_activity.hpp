// What the current thread's event loop has been given to do: the requests
// its connections submitted to devices, counted as they are submitted. The
// loop reads them to judge its naps (limits.coalesce): how many requests a
// nap gathered, and whether any was for a timed device, whose emulated
// completions a nap would delay.
#pragma once

#include <cstdint>

namespace nbdsched::daemon::stats {

struct LoopActivity {
    std::uint64_t requests = 0;
    std::uint64_t timed_requests = 0;   // of them, to a device with a timing model
};

// This thread's counts (every thread has its own; only loops read theirs).
LoopActivity& loop_activity();

}   // namespace nbdsched::daemon::stats
