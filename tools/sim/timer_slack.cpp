#include "tools/sim/timer_slack.hpp"

namespace nbdsched::sim {

TimerSlack::TimerSlack(std::uint64_t seed, Nanos max)
    : engine_(seed), max_(max.count() > 0 ? std::uint64_t(max.count()) : 0) {}

std::uint64_t TimerSlack::scale(std::uint64_t raw, std::uint64_t max) {
    if (max == UINT64_MAX) return raw;
    return std::uint64_t((unsigned __int128)raw * (max + 1) >> 64);
}

Nanos TimerSlack::next() {
    if (max_ == 0) return Nanos(0);
    return Nanos(std::int64_t(scale(engine_(), max_)));
}

}   // namespace nbdsched::sim
