#include "sched/qos/protector.hpp"

#include <algorithm>

namespace nbdsched::sched::qos {

using namespace std::chrono_literals;

namespace {

// Enough completions per window for a p90 at a qd1 reader's pace (four
// targets, as blk-iolatency sizes its window from the target), enough
// reserved requests for a share (20), never slower than a second.
Nanos window_for(Nanos target, double reserve_iops, double reserve_bps) {
    Nanos w = 1s;
    if (target.count() > 0) w = std::min(w, std::max(Nanos(100ms), target * 4));
    if (reserve_iops > 0 || reserve_bps > 0) {
        Nanos r = reserve_iops > 0 ? Nanos(static_cast<std::int64_t>(20e9 / reserve_iops)) : Nanos(250ms);
        w = std::min(w, std::clamp(r, Nanos(100ms), Nanos(1s)));
    }
    return w;
}

}   // namespace

void Protector::configure(Nanos latency_target, double reserve_iops, double reserve_bps, unsigned max_depth,
                          Time now) {
    const bool was_on = on();
    target_ = latency_target;
    reserve_iops_ = reserve_iops;
    reserve_bps_ = reserve_bps;
    max_depth_ = std::max(1u, max_depth);
    depth_ = was_on ? std::clamp(depth_, 1u, max_depth_) : max_depth_;
    window_ = window_for(target_, reserve_iops_, reserve_bps_);
    window_start_ = now;
    samples_.clear();
    served_ = served_bytes_ = 0;
    active_ = Nanos(0);
}

Protector::Verdict Protector::judge(QosGroupStats& stats) {
    if (samples_.empty() && active_.count() == 0) return Verdict::idle;
    bool missed = false, met = true;
    if (target_.count() > 0) {
        ++stats.latency_windows;
        if (samples_.empty()) {
            missed = true;   // outstanding the whole window without one completion
        } else {
            auto p90 = samples_.begin() + static_cast<std::ptrdiff_t>((samples_.size() * 9) / 10);
            if (p90 == samples_.end()) --p90;
            std::nth_element(samples_.begin(), p90, samples_.end());
            stats.last_p90 = Nanos(*p90);
            missed = stats.last_p90 > target_;
            met = stats.last_p90 * 5 < target_ * 4;   // 20% headroom before giving depth back
        }
        if (missed) ++stats.latency_misses;
    }
    if (reserved()) {
        // One request of slack: a window holds only about twenty.
        const double active = std::chrono::duration<double>(active_).count();
        const double iops = reserve_iops_ * active, bytes = reserve_bps_ * active;
        const double served = double(served_), served_bytes = double(served_bytes_);
        if ((reserve_iops_ > 0 && served + 1 < iops) || (reserve_bps_ > 0 && served_bytes * 1.05 < bytes))
            missed = true;
        if ((reserve_iops_ > 0 && served < iops * 1.1 + 1) || (reserve_bps_ > 0 && served_bytes < bytes * 1.1))
            met = false;
    }
    return missed ? Verdict::missed : met ? Verdict::met
                                          : Verdict::hold;
}

void Protector::roll(Time now, QosGroupStats& stats) {
    if (!on() || now < window_start_ + window_) return;
    switch (judge(stats)) {
    case Verdict::missed: depth_ = std::max(1u, depth_ / 2); break;
    case Verdict::met: depth_ = std::min(max_depth_, depth_ + 1); break;
    case Verdict::idle: depth_ = std::min(max_depth_, depth_ * 2); break;
    case Verdict::hold: break;
    }
    // A long gap between events closes one window, not many: nothing was measured in between.
    window_start_ = now;
    samples_.clear();
    served_ = served_bytes_ = 0;
    active_ = Nanos(0);
    stats.depth_cap = depth_;
}

}   // namespace nbdsched::sched::qos
