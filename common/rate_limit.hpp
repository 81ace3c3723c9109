// A burst of events per interval, the rest only counted: the kernel's
// printk rate limit for the daemon's log. A storage that fails every request
// (out of memory, a lost disk) would otherwise write a line per request, tens
// of thousands a second, into the journal.
#pragma once

#include <chrono>
#include <cstdint>

namespace nbdsched {

class RateLimit {
public:
    RateLimit(std::chrono::nanoseconds interval, unsigned burst) : interval_(interval), burst_(burst) {}

    // Whether the event at `now` (any monotonic clock's time since its
    // epoch) may be logged. The first event of a new interval gets, in
    // `held_back`, how many were not logged in the one before; otherwise 0.
    bool allow(std::chrono::nanoseconds now, std::uint64_t& held_back);

    // For messages that name the limit, so its numbers are written once.
    std::chrono::nanoseconds interval() const { return interval_; }
    unsigned burst() const { return burst_; }

private:
    std::chrono::nanoseconds interval_;
    unsigned burst_;
    std::chrono::nanoseconds begun_{};
    bool started_ = false;
    unsigned used_ = 0;
    std::uint64_t missed_ = 0;
};

}   // namespace nbdsched
