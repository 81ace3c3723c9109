// How late a loaded host's timer fires in the simulator (Workload::timer_slack):
// a pseudo-random delay in [0, max], the same sequence for the same seed with
// any standard library. std::mt19937_64's output is fixed by the standard;
// std::uniform_int_distribution's is not (libstdc++ and libc++ map the same
// engine output to different values), so the mapping onto [0, max] is our own.
#pragma once

#include <cstdint>
#include <random>

#include "common/units.hpp"

namespace nbdsched::sim {

class TimerSlack {
public:
    TimerSlack(std::uint64_t seed, Nanos max);

    // The next delay; always 0 when max <= 0 (the engine is not advanced then).
    Nanos next();

    // The mapping of one 64-bit engine output onto [0, max]: Lemire's
    // multiply-shift, floor(raw * (max + 1) / 2^64). Without rejection it
    // favours some values by at most (max + 1) / 2^64, far below anything a
    // run could show.
    static std::uint64_t scale(std::uint64_t raw, std::uint64_t max);

private:
    std::mt19937_64 engine_;
    std::uint64_t max_;
};

}   // namespace nbdsched::sim
