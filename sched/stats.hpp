// Counters a scheduler keeps about itself, per group and per queue. The daemon
// adds its own (bytes, latency percentiles, errors) on top of these.
#pragma once

#include <cstdint>
#include <map>

#include "sched/request.hpp"

namespace nbdsched::sched {

struct EntityStats {
    std::uint64_t dispatched = 0;   // requests sent to the device
    std::uint64_t completed = 0;
    std::uint64_t dispatched_sectors = 0;
    std::uint64_t slices = 0;      // CFQ slices / BFQ budgets started
    Nanos idle_time{};             // time the device was held idle for it
    std::uint64_t queued = 0;      // currently waiting
    std::uint64_t in_flight = 0;   // currently at the device
};

struct GroupStats : EntityStats {
    unsigned weight = 0;
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
    std::map<QueueId, EntityStats> queues;
    std::map<GroupId, QosGroupStats> qos;   // groups with QoS settings (sched/qos)
    bool hw_tag = false;                    // device detected as queueing (NCQ)
    bool idling = false;                    // an idle timer is armed right now
};

}   // namespace nbdsched::sched
