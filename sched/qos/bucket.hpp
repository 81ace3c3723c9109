// A token bucket in virtual time: tokens accrue at `rate` per second up to
// `cap`; taking may drive them down to `floor`, or to one `cost` below zero
// when that is deeper (a debt paid back before the next take: a request
// larger than the floor's depth is charged in full). The limit uses it as
// io.max's throttle, the reservation as the credit a group is owed
// (dmClock's R tag, counted in requests or bytes).
#pragma once

#include <algorithm>
#include <optional>

#include "sched/request.hpp"

namespace nbdsched::sched::qos {

class Bucket {
public:
    Bucket() = default;
    // rate 0: off (always ready, never owed).
    void configure(double rate, double cap, double floor, Time now);
    bool on() const { return rate_ > 0; }

    void refill(Time now);
    // Enough tokens for `cost` (a cost above cap needs a full bucket).
    bool ready(double cost) const { return !on() || tokens_ >= need(cost); }
    void take(double cost) {
        if (on()) tokens_ = std::max(tokens_ - cost, std::min(floor_, -cost));
    }
    // When ready(cost) becomes true; nullopt when off or ready now.
    std::optional<Time> ready_at(double cost) const;
    bool full() const { return on() && tokens_ >= cap_; }
    // How long within (last refill, now] the bucket sat full.
    Nanos full_time_until(Time now) const;
    double tokens() const { return tokens_; }

private:
    double need(double cost) const { return cost < cap_ ? cost : cap_; }

    double rate_ = 0;   // per second
    double cap_ = 0;
    double floor_ = 0;
    double tokens_ = 0;
    Time last_{};
};

}   // namespace nbdsched::sched::qos
