// Think time: the EWMA of the gap between a request completing and the next
// one arriving (__cfq_update_io_thinktime). Kept per queue (the kernel keeps
// it per process), per service tree and per group.
#pragma once

#include <cstdint>

#include "common/units.hpp"

namespace nbdsched::sched::cfq {

struct ThinkTime {
    Nanos last_end_request{};
    std::uint64_t total = 0;     // fixed point, x256
    std::uint64_t samples = 0;   // fixed point, x256
    Nanos mean{};

    // A request arrived at `now`; gaps are capped at 2 * idle.
    void update(Nanos now, Nanos idle) {
        Nanos elapsed = now - last_end_request;
        if (elapsed < Nanos{}) elapsed = Nanos{};
        if (elapsed > 2 * idle) elapsed = 2 * idle;
        samples = (7 * samples + 256) / 8;
        total = (7 * total + 256 * std::uint64_t(elapsed.count())) / 8;
        mean = Nanos(std::int64_t((total + 128) / samples));
    }
    bool valid() const { return samples > 80; }   // sample_valid()
    // cfq_io_thinktime_big(): valid and above the idle window.
    bool big(Nanos idle) const { return valid() && mean > idle; }
};

}   // namespace nbdsched::sched::cfq
