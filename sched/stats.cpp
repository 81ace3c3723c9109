#include "sched/stats.hpp"

namespace nbdsched::sched {

static_assert(expiry_reasons == std::size_t(Expiry::closed) + 1, "expiry_reasons counts every Expiry");

std::string_view to_string(Expiry reason) {
    switch (reason) {
    case Expiry::too_idle: return "too_idle";
    case Expiry::budget_timeout: return "budget_timeout";
    case Expiry::budget_exhausted: return "budget_exhausted";
    case Expiry::no_more_requests: return "no_more_requests";
    case Expiry::preempted: return "preempted";
    case Expiry::seeky_turn_ended: return "seeky_turn_ended";
    case Expiry::slice_used: return "slice_used";
    case Expiry::closed: return "closed";
    }
    return "?";
}

}   // namespace nbdsched::sched
