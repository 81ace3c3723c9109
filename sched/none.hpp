// `none`: FIFO with a maximum number of requests in flight at the device.
// The simplest policy, and the baseline the others are measured against:
// requests leave in arrival order, no idling, no groups weighing anything.
#pragma once

#include <memory>
#include <memory_resource>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/node_pool.hpp"
#include "common/reused_fifo.hpp"
#include "sched/tunable_table.hpp"

namespace nbdsched::sched {

struct NoneTunables {
    unsigned max_depth;   // never above the device's depth
};

// max_depth, declared once (none.cpp).
const TunableTable<NoneTunables>& none_table();

class NoneScheduler final : public Scheduler {
public:
    NoneScheduler(const DeviceTraits& device, const NoneTunables& tunables);

    std::string_view policy() const override { return "none"; }

    void set_group(GroupId group, unsigned weight) override;
    void open_queue(QueueId queue, GroupId group, Time now) override;
    void close_queue(QueueId queue, Time now) override;

    void submit(const Request& request, Time now) override;
    std::optional<Request> dispatch(Time now) override;
    void complete(RequestId id, Time now) override;
    std::optional<Time> next_wakeup() const override { return std::nullopt; }

    std::vector<std::string> tunable_names() const override;
    std::optional<std::string> get_tunable(std::string_view name) const override;
    std::string set_tunable(std::string_view name, std::string_view value, Time now) override;

    std::size_t queued() const override { return fifo_.size(); }
    std::size_t in_flight() const override { return in_flight_.size(); }
    SchedulerStats stats(Time now) const override;

private:
    EntityStats& queue_stats(QueueId queue);
    GroupStats& group_stats(GroupId group);
    // Drops a closed queue's counters once nothing of it is queued or in flight.
    void forget_if_drained(QueueId queue);

    DeviceTraits device_;
    NoneTunables t_;
    common::ReusedFifo<Request> fifo_;   // nothing allocated per request
    common::NodePool pool_;
    std::pmr::unordered_map<RequestId, Request> in_flight_{&pool_};
    // Hash maps while running (O(1) with 10,000 queues); stats() copies them
    // into SchedulerStats' ordered maps.
    // A queue's counters live from open_queue until it is closed and drained
    // (its group's stay): clients come and go, and stats() copies them all.
    EntityStats device_stats_;
    std::unordered_map<QueueId, EntityStats> queue_stats_;
    std::unordered_map<GroupId, GroupStats> group_stats_;
    // Closed queues with requests still queued or in flight.
    std::unordered_set<QueueId> closed_;
};

std::unique_ptr<Scheduler> make_none(const DeviceTraits& device, const Tunables& tunables,
                                     std::string& error);

}   // namespace nbdsched::sched
