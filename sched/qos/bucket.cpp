#include "sched/qos/bucket.hpp"

#include <algorithm>
#include <cmath>

namespace nbdsched::sched::qos {

void Bucket::configure(double rate, double cap, double floor, Time now) {
    refill(now);
    const bool was_on = on();
    rate_ = rate;
    cap_ = cap;
    floor_ = floor;
    // A new bucket starts full, as blk-throttle's does; a changed one keeps
    // what it holds within the new bounds.
    tokens_ = was_on ? std::clamp(tokens_, floor_, cap_) : cap_;
    last_ = now;
}

void Bucket::refill(Time now) {
    if (now <= last_) return;
    if (on()) tokens_ = std::min(cap_, tokens_ + rate_ * std::chrono::duration<double>(now - last_).count());
    last_ = now;
}

std::optional<Time> Bucket::ready_at(double cost) const {
    if (ready(cost)) return std::nullopt;
    double seconds = (need(cost) - tokens_) / rate_;
    return last_ + Nanos(static_cast<std::int64_t>(std::ceil(seconds * 1e9)));
}

Nanos Bucket::full_time_until(Time now) const {
    if (!on() || now <= last_) return Nanos(0);
    double to_full = std::max(0.0, (cap_ - tokens_) / rate_);
    Time full_at = last_ + Nanos(static_cast<std::int64_t>(std::ceil(to_full * 1e9)));
    return full_at < now ? now - full_at : Nanos(0);
}

}   // namespace nbdsched::sched::qos
