// The expiry counts of a queue, group or device as text ("too_idle 1,
// no_more_requests 2"; zeros left out), so that one CHECK asserts every
// reason's count and a failure names them.
#pragma once

#include <string>

#include "sched/stats.hpp"

namespace nbdsched::sched {

inline std::string expiry_text(const EntityStats& s) {
    std::string out;
    for (std::size_t i = 0; i < expiry_reasons; ++i) {
        if (!s.expired[i]) continue;
        out += (out.empty() ? "" : ", ") + std::string(to_string(Expiry(i))) + " " + std::to_string(s.expired[i]);
    }
    return out;
}

}   // namespace nbdsched::sched
