#include "sched/pool_share.hpp"

#include <algorithm>

namespace nbdsched::sched {

// The limits may be UINT64_MAX (none): split before multiplying. A lone
// group (its weight is the sum) has the pool: asked on every request, and
// the formula's three divisions give the same.
[[gnu::hot]] std::uint64_t weighted_share(std::uint64_t pool, std::uint64_t weight, std::uint64_t weight_sum) {
    if (weight == weight_sum) return std::max<std::uint64_t>(pool, 1);
    return std::max<std::uint64_t>(pool / weight_sum * weight + pool % weight_sum * weight / weight_sum, 1);
}

bool uses_pool(bool holds_or_waits, bool ever_used, Nanos idle_since, Nanos now, Nanos share_idle) {
    return holds_or_waits || (ever_used && now - idle_since < share_idle);
}

}   // namespace nbdsched::sched
