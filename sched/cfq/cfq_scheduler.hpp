// CfqScheduler: a faithful but simplified Linux 4.x CFQ (block/cfq-iosched.c)
// behind the Scheduler seam. Member functions are spread over files by job:
//   cfq_scheduler.cpp  seam entry points (submit/dispatch/complete, queues, groups)
//   rr.cpp             round robin: queue service trees, group tree, charging
//   select.cpp         choosing group -> workload -> queue, slice expiry, preemption
//   slices.cpp         slice lengths (prio, low_latency scaling, workload slices)
//   idling.cpp         should_idle / arm_slice_timer / wait_busy / hw_tag / idle window
//   dispatch.cpp       dispatch limits and moving a request to the device
//   stats.cpp          counters and idle-time accounting
// Left out (see docs/schedulers-cfq.md): cooperator queue merging, REQ_PRIO
// boosting, ioprio levels and the RT/IDLE classes (everything is BE, prio 4),
// hierarchical groups (all groups are children of one root).
#pragma once

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "common/node_pool.hpp"
#include "sched/cfq/group.hpp"
#include "sched/cfq/queue.hpp"
#include "sched/cfq/tunables.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sched::cfq {

class CfqScheduler final : public Scheduler {
public:
    CfqScheduler(const DeviceTraits& device, const CfqTunables& tunables);
    ~CfqScheduler() override;

    std::string_view policy() const override { return "cfq"; }

    void set_group(GroupId group, unsigned weight) override;
    void open_queue(QueueId queue, GroupId group, Time now) override;
    void close_queue(QueueId queue, Time now) override;

    void submit(const Request& request, Time now) override;
    std::optional<Request> dispatch(Time now) override;
    void complete(RequestId id, Time now) override;
    std::optional<Time> next_wakeup() const override { return timer_; }

    std::vector<std::string> tunable_names() const override;
    std::optional<std::string> get_tunable(std::string_view name) const override;
    std::string set_tunable(std::string_view name, std::string_view value, Time now) override;

    std::size_t queued() const override { return std::size_t(rq_queued_); }
    std::size_t in_flight() const override { return std::size_t(rq_in_driver_); }
    SchedulerStats stats(Time now) const override;

    const CfqTunables& tunables() const { return t_; }

private:
    struct InFlight {
        RequestId id;
        CfqQueue* queue;
        Request req;
        // queue_stats_ of req.queue for a sync request (its queue, and so the
        // entry, outlive it); null for an async one, whose client may be
        // forgotten before it completes.
        EntityStats* client_stats;
    };

    // cfq_scheduler.cpp
    void advance(Time now);
    CfqGroup& group(GroupId id);
    CfqQueue& queue_for(const Request& req, Time now);
    void rq_enqueued(CfqQueue& q, const Request& req, Time now);
    // After every dispatch and completion: the usual case (nothing closed
    // or retired) checked here, without a call.
    void reap_closed() {
        if (!retired_.empty() || !closed_.empty()) reap_drained();
    }
    // Frees the closed and retired queues that have drained.
    void reap_drained();

    // rr.cpp
    void service_tree_add(CfqQueue& q, bool add_front, Time now);
    void resort_rr_list(CfqQueue& q, Time now);
    void add_rr(CfqQueue& q, Time now);
    void del_rr(CfqQueue& q);
    void group_notify_add(CfqGroup& g);
    void group_notify_del(CfqGroup& g);
    void group_tree_add(CfqGroup& g);
    void group_tree_del(CfqGroup& g);
    void group_served(CfqGroup& g, CfqQueue& q, Time now);

    // select.cpp
    CfqQueue* select_queue(Time now);
    void choose_cfqg(Time now);
    void choose_wl_type(CfqGroup& g, Time now);
    CfqQueue* get_next_queue() const;
    void set_active_queue(CfqQueue* q, Time now);
    void slice_expired(Time now, bool timed_out, Expiry why);
    void expire_queue(CfqQueue& q, Time now, bool timed_out, Expiry why);
    // Why a slice that ran out ended: slice_used, or seeky_turn_ended when
    // contended_seeky_depth cut it at its first completion.
    static Expiry used_up(const CfqQueue& q) { return q.seeky_slice ? Expiry::seeky_turn_ended : Expiry::slice_used; }
    bool should_preempt(const CfqQueue& q, const Request& req, Time now) const;
    void preempt_queue(CfqQueue& q, Time now);

    // slices.cpp
    Nanos prio_slice(bool sync, int prio) const;
    Nanos group_slice(const CfqGroup& g) const;
    unsigned group_avg_queues(CfqGroup& g);
    Nanos scaled_slice(CfqQueue& q);
    void set_prio_slice(CfqQueue& q, Time now);
    bool slice_used(const CfqQueue& q, Time now) const;
    Nanos slice_usage(const CfqQueue& q, Time now) const;
    std::int64_t slice_offset(const CfqQueue& q) const;
    Nanos workload_slice(CfqGroup& g, WlType type) const;

    // idling.cpp
    bool should_idle(const CfqQueue& q) const;
    void arm_slice_timer(Time now);
    bool should_wait_busy(const CfqQueue& q, Time now) const;
    void idle_timer_fired(Time now);
    void update_idle_window(CfqQueue& q);
    void update_hw_tag();
    bool hw_tag() const { return hw_tag_ != 0; }   // -1 (unknown) counts as queueing
    bool iops_mode() const { return t_.slice_idle == Nanos{} && hw_tag(); }
    // A seeky sync queue on a disk while another group is busy: its next
    // request seeks anyway, so serving it one request at a time costs no
    // throughput, and the other group waits behind one request, not behind
    // a slice and a device queue of them (contended_seeky_depth).
    bool contended_seeky(const CfqQueue& q) const {
        return t_.contended_seeky_depth && device_.rotational && q.sync && q.seeky_so_far() &&
               grp_tree_.count() > (q.group->on_tree ? 1u : 0u);
    }
    // Such a queue with its request at the disk keeps the device until that
    // request completes: neither expired nor preempted by a sibling before
    // (select_queue, should_preempt).
    bool holds_device_for_seeky_request(const CfqQueue& q) const { return q.dispatched && contended_seeky(q); }
    // What a request costs its group in IOPS mode (cfq_group_served charges
    // one per request): a 512 KiB read-ahead prefetch is not one 4 KiB read.
    std::uint64_t iops_charge(const Request& r) const {
        const std::uint64_t unit = std::uint64_t(t_.iops_charge_kb) << 10;
        return unit ? std::max<std::uint64_t>((r.length + unit - 1) / unit, 1) : 1;
    }

    // dispatch.cpp
    bool may_dispatch(const CfqQueue& q, Time now) const;
    std::optional<Request> dispatch_request(CfqQueue& q, Time now);
    ElevatorParams elevator() const;

    // stats.cpp
    void start_timer(Nanos delay, Time now);
    void cancel_timer(Time now);
    EntityStats& client_stats(CfqQueue& q);   // q must be a client's sync queue
    // The client's counters for a request of q; null when the client is gone.
    EntityStats* queue_stats(CfqQueue& q, const Request& req);
    EntityStats* completion_stats(const InFlight& f);
    // Where the request in flight with this id is, or would go.
    std::vector<InFlight>::iterator in_flight_slot(RequestId id);
    // Drops a client's counters once none of its sync queues is left.
    void forget_client_stats(QueueId client);

    DeviceTraits device_;
    CfqTunables t_;
    // First, so it outlives every container whose nodes it holds.
    common::NodePool pool_;

    std::map<GroupId, std::unique_ptr<CfqGroup>> groups_;
    // Hash maps for lookups only: they are iterated nowhere but in stats(),
    // where order does not matter, so decisions stay deterministic.
    std::unordered_map<QueueId, std::unique_ptr<CfqQueue>> queues_;   // sync queues by client
    // The sync queue queue_for() found last: a client's requests come in
    // runs, and the hash lookup (a division) is skipped for them. Cleared
    // wherever an entry of queues_ is replaced or erased.
    CfqQueue* last_sync_ = nullptr;
    std::set<QueueId> closed_;
    // Queues of clients that moved to another group while they still had
    // requests: closed, drained by their old group, then freed.
    std::vector<std::unique_ptr<CfqQueue>> retired_;
    // Sorted by id: at most the device's depth, looked up at every
    // completion; a vector keeps its capacity, so no node per request.
    std::vector<InFlight> in_flight_;
    std::uint64_t next_queue_key_ = 0;

    GroupTree grp_tree_{&pool_};
    unsigned active_weight_ = 0;   // the root's children_weight
    CfqGroup* serving_group_ = nullptr;
    WlType serving_type_ = WlType::sync_noidle;
    Time workload_expires_{};
    CfqQueue* active_ = nullptr;

    unsigned busy_queues_ = 0;
    unsigned busy_sync_queues_ = 0;
    int rq_in_driver_ = 0;
    std::array<int, 2> rq_in_flight_{};   // [async, sync]
    int rq_queued_ = 0;

    int hw_tag_ = -1;
    int hw_tag_est_depth_ = 0;
    int hw_tag_samples_ = 0;

    std::optional<Time> timer_;   // the idle slice timer
    Time idle_start_{};
    std::uint64_t last_position_ = 0;
    Time last_delayed_sync_{};
    bool clock_started_ = false;
    Time now_{};

    // Counters. A client's live from its first request until its queue is
    // reaped (closed and drained); groups' stay.
    EntityStats device_stats_;
    std::unordered_map<QueueId, EntityStats> queue_stats_;
};

}   // namespace nbdsched::sched::cfq
