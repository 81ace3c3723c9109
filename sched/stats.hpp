// Counters a scheduler keeps about itself, per group and per queue. The daemon
// adds its own (bytes, latency percentiles, errors) on top of these.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string_view>

#include "sched/request.hpp"

namespace nbdsched::sched {

// Why a queue's turn at the device ended (a CFQ slice, a BFQ budget's
// service), after the kernel's enum bfqq_expiration (BFQQE_*) where cfq and
// bfq mean the same thing. bfq decides its next budget from it
// (recalc_budget); cfq only counts it. See docs/schedulers-{cfq,bfq}.md.
enum class Expiry : std::uint8_t {
    too_idle,           // BFQQE_TOO_IDLE / cfq: the idle timer ran out and the queue stayed empty
    budget_timeout,     // BFQQE_BUDGET_TIMEOUT: held the device for timeout_sync (bfq)
    budget_exhausted,   // BFQQE_BUDGET_EXHAUSTED / cfq: an async queue dispatched its slice_async_rq
    no_more_requests,   // BFQQE_NO_MORE_REQUESTS: empty, and not worth idling for
    preempted,          // BFQQE_PREEMPTED / cfq: cfq_should_preempt
    seeky_turn_ended,   // nbdsched's contended_seeky_depth: a seeky queue's turn ends with its requests
    slice_used,         // cfq: the time slice ran out (cfq_slice_used)
    closed,             // cfq: the client went away or moved to another group while in service
};
inline constexpr std::size_t expiry_reasons = 8;
// The reason as the stats name it ("too_idle").
std::string_view to_string(Expiry reason);

struct EntityStats {
    std::uint64_t dispatched = 0;   // requests sent to the device
    std::uint64_t completed = 0;
    std::uint64_t dispatched_sectors = 0;
    std::uint64_t slices = 0;      // CFQ slices / BFQ budgets started
    Nanos idle_time{};             // time the device was held idle for it
    std::uint64_t queued = 0;      // currently waiting
    std::uint64_t in_flight = 0;   // currently at the device
    // Turns that ended, by Expiry: an array, so counting one is an increment.
    std::array<std::uint64_t, expiry_reasons> expired{};

    std::uint64_t expirations(Expiry reason) const { return expired[std::size_t(reason)]; }
    void count_expiry(Expiry reason) { ++expired[std::size_t(reason)]; }
};

// A client's queue. The flags are its sync queue's, now; unset where the
// policy has no such flag or the client has no sync queue.
struct QueueStats : EntityStats {
    std::optional<bool> io_bound;      // bfq: IO_bound (bfq_bfqq_IO_bound); off, it earns no idling for throughput
    std::optional<bool> idle_window;   // cfq: the idle window is on (cfq_cfqq_idle_window)
};

struct GroupStats : EntityStats {
    unsigned weight = 0;
    // bfq: the service B-WF2Q+ charged the group, in sectors: its requests'
    // sectors, or, for a turn charged by time (a slow queue, a budget
    // timeout), the peak rate x the time. B-WF2Q+ divides this by weight;
    // dispatched_sectors follows only where every turn is charged alike.
    std::uint64_t charged_sectors = 0;
};

// What the QoS layer (sched/qos) did for a group with a reserve, limit or
// latency target.
struct QosGroupStats {
    Nanos throttled_time{};                  // time with requests held back by the limit
    std::uint64_t limit_delayed = 0;         // requests the limit held back
    Nanos below_reservation{};               // time active and owed service below the floor
    std::uint64_t reserved_dispatches = 0;   // dispatched ahead of the policy for the floor
    std::uint64_t latency_windows = 0;       // windows judged against the latency target
    std::uint64_t latency_misses = 0;        // of those, windows whose p90 missed it
    Nanos last_p90{};                        // the last judged window's p90
    unsigned depth_cap = 0;                  // outstanding requests it allows unprotected groups
};

struct SchedulerStats {
    EntityStats device;
    std::map<GroupId, GroupStats> groups;
    std::map<QueueId, QueueStats> queues;
    std::map<GroupId, QosGroupStats> qos;   // groups with QoS settings (sched/qos)
    bool hw_tag = false;                    // device detected as queueing (NCQ)
    bool idling = false;                    // an idle timer is armed right now
};

}   // namespace nbdsched::sched
