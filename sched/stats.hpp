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

struct SchedulerStats {
    EntityStats device;
    std::map<GroupId, GroupStats> groups;
    std::map<QueueId, EntityStats> queues;
    bool hw_tag = false;   // device detected as queueing (NCQ)
    bool idling = false;   // an idle timer is armed right now
};

}   // namespace nbdsched::sched
