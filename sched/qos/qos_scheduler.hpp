// Reservations, limits and latency targets in front of any policy (none,
// cfq, bfq), as the kernel puts io.max and io.latency above the elevator and
// dmClock puts a constraint phase before its weight phase:
//
//   submit -> gate (limit tokens; a protector's depth cap) -> policy -> device
//                                     \-> floor: a group below its reservation
//                                         is dispatched ahead of the policy
//
// A group with none of the settings goes straight to the policy; with no
// group having any, every call is passed through. docs/qos.md has the design.
#pragma once

#include <map>
#include <memory>
#include <memory_resource>
#include <unordered_map>

#include "common/node_pool.hpp"
#include "common/reused_fifo.hpp"
#include "sched/qos/bucket.hpp"
#include "sched/qos/protector.hpp"
#include "sched/qos/spec.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sched::qos {

class QosScheduler final : public Scheduler {
public:
    QosScheduler(std::unique_ptr<Scheduler> inner, const DeviceTraits& device);

    // Empty on success, else why the settings were refused (check()).
    std::string set_qos(GroupId group, const GroupQos& qos, Time now);
    GroupQos qos(GroupId group) const;
    Scheduler& inner() { return *inner_; }

    std::string_view policy() const override { return inner_->policy(); }
    void set_group(GroupId group, unsigned weight) override { inner_->set_group(group, weight); }
    void open_queue(QueueId queue, GroupId group, Time now) override;
    void close_queue(QueueId queue, Time now) override;

    void submit(const Request& request, Time now) override;
    std::optional<Request> dispatch(Time now) override;
    void complete(RequestId id, Time now) override;
    std::optional<Time> next_wakeup() const override;

    std::vector<std::string> tunable_names() const override { return inner_->tunable_names(); }
    std::optional<std::string> get_tunable(std::string_view name) const override {
        return inner_->get_tunable(name);
    }
    std::string set_tunable(std::string_view name, std::string_view value, Time now) override {
        return inner_->set_tunable(name, value, now);
    }

    std::size_t queued() const override { return inner_->queued() + held_; }
    std::size_t in_flight() const override { return inner_->in_flight() + direct_in_flight_; }
    SchedulerStats stats(Time now) const override;

private:
    struct Group {
        GroupQos qos;
        common::ReusedFifo<Request> gated;   // held by the limit or a protector's depth cap
        common::ReusedFifo<Request> ready;   // reserved: past the gate, for the floor or the policy
        Bucket limit_iops, limit_bps, reserve_iops, reserve_bps;
        Protector protector;
        unsigned outstanding = 0;   // past the gate, not completed
        unsigned in_policy = 0;     // handed to the policy, not yet dispatched
        bool limit_blocked = false;
        QosGroupStats stats;
        EntityStats direct;   // what the floor dispatched (the policy never saw it)
        bool reserved() const { return qos.reserve.set(); }
        bool protects() const { return reserved() || qos.latency_target.count() > 0; }
    };
    struct Track {
        GroupId group;
        QueueId queue;
        Time arrival;
        std::uint64_t sectors;
        bool direct;
    };

    Group& group(GroupId id) { return groups_[id]; }
    void advance(Time now);
    bool holds(const Group& protector) const;
    std::optional<Time> held_until(const Group& g) const;
    unsigned depth_cap(const Group& g, Time now) const;
    void pass_gate(Group& g, Time now);
    bool limit_ready(const Group& g, const Request& r) const;
    bool below_floor(const Group& g, const Request& r) const;
    void charge_floor(Group& g, const Request& r);
    std::optional<Request> dispatch_floor(Time now);
    void to_policy(Group& g, const Request& r, Time now);
    bool release_closed(QueueId queue);
    void flush_all(Time now);

    std::unique_ptr<Scheduler> inner_;
    DeviceTraits device_;
    std::map<GroupId, Group> groups_;   // ordered: ties break the same way every run
    common::NodePool pool_;             // tracks_' nodes: nothing allocated per request
    std::pmr::unordered_map<RequestId, Track> tracks_{&pool_};
    std::unordered_map<QueueId, EntityStats> direct_queues_;
    // Closed clients' requests still held here, by queue: the policy has seen the close.
    std::unordered_map<QueueId, unsigned> closed_held_;
    bool active_ = false;    // some group has a setting
    std::size_t held_ = 0;   // gated + ready, all groups
    std::size_t direct_in_flight_ = 0;
    Time last_{};
};

// The QoS layer of a device's scheduler, or nullptr when it has none.
QosScheduler* qos_layer(Scheduler& scheduler);
// `inner` behind a QoS layer.
std::unique_ptr<QosScheduler> with_qos(std::unique_ptr<Scheduler> inner, const DeviceTraits& device);

}   // namespace nbdsched::sched::qos
