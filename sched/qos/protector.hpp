// The depth a protected group lets every unprotected group keep outstanding:
// blk-iolatency's queue-depth scaling, driven once per window by the group's
// latency p90 against its target and by what it was served against what its
// reservation entitles it to while it had requests outstanding. Missed: halve; met with headroom: one more; idle: double.
#pragma once

#include <cstdint>
#include <vector>

#include "sched/request.hpp"
#include "sched/stats.hpp"

namespace nbdsched::sched::qos {

class Protector {
public:
    // No target and no reserve: off (depth = max_depth).
    void configure(Nanos latency_target, double reserve_iops, double reserve_bps, unsigned max_depth, Time now);
    bool on() const { return target_.count() > 0 || reserved(); }
    unsigned depth() const { return depth_; }
    bool pressed() const { return depth_ < max_depth_; }   // has missed, not yet recovered
    Nanos window() const { return window_; }

    void add_latency(Nanos latency) {
        if (target_.count() > 0) samples_.push_back(latency.count());
    }
    void add_served(std::uint64_t bytes) {
        ++served_;
        served_bytes_ += bytes;
    }
    void add_active(Nanos d) { active_ += d; }
    // Closes the window if it ended by `now`, counting it in `stats`.
    void roll(Time now, QosGroupStats& stats);

private:
    enum class Verdict { missed,
                         met,
                         hold,
                         idle };
    Verdict judge(QosGroupStats& stats);
    bool reserved() const { return reserve_iops_ > 0 || reserve_bps_ > 0; }

    Nanos target_{0};
    double reserve_iops_ = 0, reserve_bps_ = 0;
    unsigned max_depth_ = 1;
    unsigned depth_ = 1;
    Nanos window_{0};
    Time window_start_{};
    std::vector<std::int64_t> samples_;
    std::uint64_t served_ = 0, served_bytes_ = 0;   // dispatched in this window
    Nanos active_{0};                               // time with requests outstanding in this window
};

}   // namespace nbdsched::sched::qos
