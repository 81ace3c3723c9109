// How a pool of in-flight requests (and of their bytes) is shared by group
// weight: the rule of the daemon's in-flight budget (limits.inflight_fair_share,
// daemon/device/inflight_budget.hpp), kept here so that the simulator's `line`
// pool (tools/sim/admission_line.hpp) applies the same one. The analogue of
// BFQ's bfqq_request_over_limit() (Linux 5.17+, "bfq: Limit number of requests
// consumed by each cgroup"): while several groups use the device, a group may
// hold pool * weight / (sum of the weights of the groups using it).
#pragma once

#include <chrono>
#include <cstdint>

#include "common/units.hpp"

namespace nbdsched::sched {

// A group's share of `pool` (slots or bytes; UINT64_MAX: no limit), at least 1.
// bfqq_request_over_limit() rounds to the closest; rounding down keeps the
// shares' sum within the pool.
std::uint64_t weighted_share(std::uint64_t pool, std::uint64_t weight, std::uint64_t weight_sum);

// How long a group still counts as using the pool after its last request came
// back. Three slice_idle windows of 8 ms: the window in which BFQ takes a
// queue's next request as "in time". One window was too short for a reader
// on a loaded host (exp10 at load 12: p99 6.9x with bfq).
inline constexpr Nanos default_share_idle = std::chrono::milliseconds(24);

// Does a group count as using the pool: it holds room or waits for it, or
// gave back its last room less than `share_idle` ago? A qd1 reader holds
// nothing between a reply and its next request, and would otherwise find the
// pool refilled by a flooder each time.
bool uses_pool(bool holds_or_waits, bool ever_used, Nanos idle_since, Nanos now, Nanos share_idle);

}   // namespace nbdsched::sched
