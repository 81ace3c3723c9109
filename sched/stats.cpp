#include "sched/stats.hpp"

namespace nbdsched::sched {

namespace {

// In the order of enum Expiry.
constexpr std::array<std::string_view, expiry_reasons> expiry_names{
    "too_idle",
    "budget_timeout",
    "budget_exhausted",
    "no_more_requests",
    "preempted",
    "seeky_turn_ended",
    "slice_used",
    "closed",
};
static_assert(expiry_reasons == std::size_t(Expiry::closed) + 1, "expiry_reasons counts every Expiry");

}   // namespace

std::string_view to_string(Expiry reason) {
    return std::size_t(reason) < expiry_names.size() ? expiry_names[std::size_t(reason)] : "?";
}

}   // namespace nbdsched::sched
