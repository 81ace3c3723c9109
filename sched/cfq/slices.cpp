// Slice lengths: per queue (cfq_prio_slice, cfq_scaled_cfqq_slice with
// low_latency), per workload (choose_wl_class_and_type) and what a slice
// used (cfq_cfqq_slice_usage).
#include <algorithm>
#include <limits>

#include "sched/cfq/cfq_scheduler.hpp"
#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {
namespace {

// a * b / c, the product in 128 bits: the slice formulas multiply two
// durations (1 s x 10 s is 10^19 ns^2, past int64), which the tunables allow.
// The result saturates, though with c >= b it is at most a.
std::int64_t mul_div(std::int64_t a, std::int64_t b, std::int64_t c) {
    const __int128 r = static_cast<__int128>(a) * b / std::max<std::int64_t>(c, 1);
    if (r > std::numeric_limits<std::int64_t>::max()) return std::numeric_limits<std::int64_t>::max();
    if (r < std::numeric_limits<std::int64_t>::min()) return std::numeric_limits<std::int64_t>::min();
    return static_cast<std::int64_t>(r);
}

}   // namespace

Nanos CfqScheduler::prio_slice(bool sync, int prio) const {
    const Nanos base = t_.slice(sync);
    return base + base / kSliceScale * (4 - prio);
}

Nanos CfqScheduler::group_slice(const CfqGroup& g) const {
    return Nanos(mul_div(t_.target_latency.count(), g.vfraction, std::int64_t(1) << kServiceShift));
}

// Busy queues in the group, averaged so that it follows rises fast and
// falls slowly (cfq_group_get_avg_queues).
unsigned CfqScheduler::group_avg_queues(CfqGroup& g) {
    const unsigned busy = g.busy_queues();
    const unsigned lo = std::min(g.busy_queues_avg, busy);
    const unsigned hi = std::max(g.busy_queues_avg, busy);
    g.busy_queues_avg = ((kHistDivisor - 1) * hi + lo + kHistDivisor / 2) / kHistDivisor;
    return g.busy_queues_avg;
}

Nanos CfqScheduler::scaled_slice(CfqQueue& q) {
    Nanos slice = prio_slice(q.sync, kIoprio);
    if (!t_.low_latency) return slice;
    // Fit the slices of all busy queues of the group into the group's share
    // of target_latency, but not below 2 * slice_idle (scaled like the slice).
    const unsigned iq = group_avg_queues(*q.group);
    const Nanos sync_slice = t_.slice_sync;
    const Nanos expect_latency = Nanos(mul_div(sync_slice.count(), iq, 1));
    const Nanos gslice = group_slice(*q.group);
    if (expect_latency > gslice) {
        const Nanos base_low = 2 * t_.slice_idle;
        Nanos low = Nanos(mul_div(base_low.count(), slice.count(), sync_slice.count()));
        low = std::min(slice, low);
        slice = Nanos(mul_div(slice.count(), gslice.count(), expect_latency.count()));
        slice = std::max(slice, low);
    }
    return slice;
}

void CfqScheduler::set_prio_slice(CfqQueue& q, Time now) {
    q.seeky_slice = contended_seeky(q);
    if (q.seeky_slice) {
        // The slice ends at its first completion; it used the time since the
        // queue was scheduled in (what an expiry before any completion is charged).
        q.slice_start = q.dispatch_start;
        q.slice_end = now;
        q.allocated_slice = std::max(now - q.dispatch_start, kJiffy);
        return;
    }
    const Nanos slice = scaled_slice(q);
    q.slice_start = now;
    q.slice_end = now + slice;
    q.allocated_slice = slice;
}

[[gnu::hot]] bool CfqScheduler::slice_used(const CfqQueue& q, Time now) const {
    if (q.slice_new) return false;   // slice_end is not set before the first completion
    return now >= q.slice_end;
}

Nanos CfqScheduler::slice_usage(const CfqQueue& q, Time now) const {
    if (!q.slice_start || *q.slice_start == now) {
        // Expired before any completion: charge the time since it was
        // scheduled in (seek time included), at least one jiffy.
        return std::max(now - q.dispatch_start, kJiffy);
    }
    return std::min(now - *q.slice_start, q.allocated_slice);
}

std::int64_t CfqScheduler::slice_offset(const CfqQueue& q) const {
    // Signed on purpose: for the first queue of a group (nr_cfqq == 0) the
    // kernel's unsigned arithmetic wraps to the same negative offset.
    const std::int64_t spread = (prio_slice(true, 0) - prio_slice(q.sync, kIoprio)).count();
    return std::int64_t(q.group->nr_cfqq - 1) * spread;
}

Nanos CfqScheduler::workload_slice(CfqGroup& g, WlType type) const {
    // The workload's share of the group's slice: in proportion to its queues.
    const unsigned count = unsigned(g.tree(type).count());
    const unsigned busy = std::max({g.busy_queues_avg, g.busy_queues(), 1u});
    Nanos slice = Nanos(mul_div(group_slice(g).count(), count, busy));
    if (type == WlType::async) {
        // Async queues are charged system wide, then scaled by async/sync.
        if (busy_queues_) {
            const Nanos cap = Nanos(mul_div(t_.target_latency.count(), g.busy_async_queues(), busy_queues_));
            slice = std::min(slice, cap);
        }
        slice = Nanos(mul_div(slice.count(), t_.slice_async.count(), t_.slice_sync.count()));
    } else {
        slice = std::max(slice, 2 * t_.slice_idle);
    }
    return std::max(slice, kMinTt);
}

}   // namespace nbdsched::sched::cfq
