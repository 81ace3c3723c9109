// BfqScheduler: the Scheduler seam implemented with BFQ. Two scheduling
// levels of B-WF2Q+ (groups in the device tree, queues in each group's
// tree), sector budgets with the kernel's feedback, budget timeouts, time
// charging of slow queues, and bfq_better_to_idle() idling. The member
// functions are split by job over scheduler.cpp (events and bookkeeping),
// select.cpp (choosing and expiring the in-service queue), lone.cpp (the
// same for a lone queue, without the trees), idle.cpp
// (when and how long to plug dispatch), inject.cpp (serving other queues
// while plugged) and introspect.cpp.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <unordered_map>
#include <vector>

#include "common/node_pool.hpp"
#include "sched/bfq/device_model.hpp"
#include "sched/bfq/queue.hpp"
#include "sched/bfq/tunables.hpp"
#include "sched/bfq/wf2q.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sched::bfq {

// Why the in-service queue stops being served is sched::Expiry (enum
// bfqq_expiration, sched/stats.hpp): its bfq reasons, and seeky_turn_ended
// for contended_seeky_depth; slice_used and closed are cfq's.

struct BfqGroup {
    explicit BfqGroup(std::pmr::memory_resource* pool) : tree(pool) {}

    Entity entity;
    ServiceTree tree;            // this group's queues
    std::uint64_t pending = 0;   // queued + in flight, for the symmetry test
    Time recent_until{};         // its last completion + the in-time window (contended_seeky)
    Time preempted_until{};      // preempted while owed idling, on flash: counts as pending until then
    GroupStats stats;
};

class BfqScheduler final : public Scheduler {
public:
    BfqScheduler(const DeviceTraits& device, const BfqTunables& tunables);

    std::string_view policy() const override { return "bfq"; }

    void set_group(GroupId group, unsigned weight) override;
    void open_queue(QueueId queue, GroupId group, Time now) override;
    void close_queue(QueueId queue, Time now) override;

    void submit(const Request& request, Time now) override;
    std::optional<Request> dispatch(Time now) override;
    void complete(RequestId id, Time now) override;
    std::optional<Time> next_wakeup() const override;

    std::vector<std::string> tunable_names() const override;
    std::optional<std::string> get_tunable(std::string_view name) const override;
    std::string set_tunable(std::string_view name, std::string_view value, Time now) override;

    std::size_t queued() const override { return queued_; }
    std::size_t in_flight() const override { return in_flight_.size(); }
    SchedulerStats stats(Time now) const override;

    // Introspection for tests and the control socket.
    std::uint64_t current_max_budget() const { return max_budget(); }
    int hw_tag() const { return hw_tag_.value(); }
    // bfqq->max_budget of a client's sync or async queue, if it exists.
    std::optional<std::uint64_t> queue_max_budget(QueueId client, bool sync) const;
    // Requests dispatched by injection so far, and a sync queue's inject limit.
    std::uint64_t injected() const { return inject_.injected; }
    // Times a lone queue's next request resumed its budget in place (see
    // Lone below).
    std::uint64_t lone_resumes() const { return lone_resumes_; }
    // Off: every lone queue goes the long way (the reference in tests).
    void set_lone_shortcut(bool on) { lone_shortcut_ = on; }
    std::optional<unsigned> inject_limit(QueueId client) const;

private:
    struct InFlight {
        RequestId id;
        // A queue with requests in flight is never destroyed (maybe_forget).
        BfqQueue* queue;
        std::uint64_t sectors;
    };
    struct Client {
        GroupId group = 0;
        bool open = true;
        EntityStats stats;
    };

    // scheduler.cpp
    BfqGroup& group(GroupId id);
    static BfqGroup& group_of(const BfqQueue& q) { return *q.home; }
    // Where the request in flight with this id is, or would go.
    std::vector<InFlight>::iterator in_flight_slot(RequestId id);
    BfqQueue& queue_for(const Request& request, Time now);
    void activate_queue(BfqQueue& q, Time now);
    // Its first part: the budget of a queue that becomes busy; true when it
    // only paused for its next request and may reclaim the device.
    bool activation_budget(BfqQueue& q, Time now);
    // bfq_bfqq_handle_idle_busy_switch's arrived_in_time, and its io_bound
    // bookkeeping for a queue that becomes busy again.
    bool arrives_in_time(const BfqQueue& q, Time now) const;
    void note_busy_again(BfqQueue& q, bool in_time);
    // activate_queue's last steps: into its group's tree, the group into the
    // device's, with the budget already set.
    void enter_trees(BfqQueue& q);
    void maybe_forget(BfqQueue& q);
    // Erases a closed client with no queue left (its stats go with it; its
    // group's stay).
    void forget_client(QueueId id);
    // Runs the idle timer's expiry if it is due; asked at every event.
    void process_timer(Time now) {
        now_ = std::max(now_, now);
        if (idle_until_ && now >= *idle_until_) idle_timer_fired(now);
    }
    void idle_timer_fired(Time now);
    void refresh_max_budget();

    // select.cpp
    BfqQueue* select_queue(Time now);
    BfqQueue* set_in_service(Time now);
    // set_in_service's bookkeeping for the queue (and its group) just chosen.
    void begin_service(BfqQueue& q, Time now);
    void expire(BfqQueue& q, bool compensate, Expiry reason, Time now);
    // expire()'s two halves: what the turn earned (statistics, time charge,
    // the next budget), returning the budget it left; and leaving service.
    std::uint64_t account_expiry(BfqQueue& q, bool compensate, Expiry reason, Time now);
    void leave_service(BfqQueue& q, Expiry reason, std::uint64_t left, Time now);
    // The in-service queue ran dry with nothing in flight (no_more_requests).
    void expire_empty(BfqQueue& q, Time now);
    // lone.cpp: a lone queue's expiry and reactivation without the trees.
    bool alone_in_trees(const BfqQueue& q) const;
    bool resumes_lone(const Request& r) const;
    void resume_lone(BfqQueue& q, Time now);
    void restart_lone(Time now);
    void leave_lone();
    void recalc_budget(BfqQueue& q, Expiry reason, Time now);
    bool is_slow(const BfqQueue& q, bool compensate, Time now, std::uint64_t& delta_ms) const;
    void charge_time(BfqQueue& q, std::uint64_t time_ms);
    void served(BfqQueue& q, std::uint64_t sectors);
    // bfq_serv_to_charge, inline for sync requests (three calls a request).
    std::uint64_t charge(const Request& r, const BfqQueue& q) const {
        const std::uint64_t sectors = std::max<std::uint64_t>(r.sectors(), 1);
        return q.sync() ? sectors : async_charge(sectors);
    }
    std::uint64_t async_charge(std::uint64_t sectors) const;
    std::uint64_t budget_left(const BfqQueue& q) const;
    std::uint64_t max_budget() const;   // bfq_max_budget()
    std::uint64_t min_budget() const;   // bfq_min_budget()
    bool budget_timed_out(const BfqQueue& q, Time now) const;
    bool may_expire_for_budget_timeout(const BfqQueue& q, Time now) const;
    const Request* next_rq(BfqQueue& q, Time now) {
        if (q.size() == 1) return &q.only_request(tunables_.fifo_expire(q.sync()), now);
        return find_next_rq(q, now);
    }
    const Request* find_next_rq(BfqQueue& q, Time now);
    void maybe_preempt(BfqQueue& arrived, bool wants_to_preempt, Time now);

    // idle.cpp
    bool better_to_idle(const BfqQueue& q) const;
    bool must_idle(const BfqQueue& q) const { return q.empty() && better_to_idle(q); }
    bool idling_boosts_thr_without_issues(const BfqQueue& q) const;
    bool idling_needed_for_service_guarantees(const BfqQueue& q) const;
    bool asymmetric_scenario() const;
    // Off (no depth, or flash) without a call: asked twice a request.
    bool contended_seeky(const BfqQueue& q, Time now) const {
        return tunables_.contended_seeky_depth && device_.rotational && seeky_and_contended(q, now);
    }
    bool seeky_and_contended(const BfqQueue& q, Time now) const;
    bool several_groups_pending() const;
    void arm_idle_timer(BfqQueue& q, Time now);
    void stop_idling(BfqQueue& q, Time now);
    Nanos guarantee_idle() const;

    // inject.cpp
    BfqQueue* injection_source(const BfqQueue& in_service, Time now);
    BfqQueue* choose_queue_for_injection(Time now);
    BfqQueue* injectable_in(BfqGroup& g, bool large_ok, Time now);
    void retire_drained(BfqQueue& q);
    void inject_on_arrival(BfqQueue& q, bool in_service, Time now);
    void inject_on_dispatch(const BfqQueue& q, RequestId id);
    void inject_on_completion(BfqQueue& q, RequestId id, Time now);
    void update_inject_limit(BfqQueue& q, Time now);
    void reset_inject_limit(BfqQueue& q, Time now);

    DeviceTraits device_;
    BfqTunables tunables_;
    // Before the trees and maps whose nodes it holds, so it outlives them.
    common::NodePool pool_;
    std::uint64_t computed_max_budget_;    // bfqd->bfq_max_budget
    std::uint64_t budgets_assigned_ = 0;   // smoothed towards 256
    bool peak_rate_known_ = false;         // the estimator produced a rate
    HwTagDetector hw_tag_;
    PeakRateEstimator peak_rate_;

    ServiceTree root_{&pool_};   // groups
    std::map<GroupId, BfqGroup> groups_;
    // Hash maps, looked up on every request: they are iterated nowhere but
    // in stats(), where order does not matter, so decisions stay
    // deterministic. Their elements do not move (BfqQueue::client_stats and
    // client_group point into clients_, whose entries are erased only when
    // the client is closed and has no queue left; BfqQueue::home into
    // groups_, which are never erased).
    std::unordered_map<std::uint64_t, BfqQueue> queues_;   // key = client * 2 + async
    std::unordered_map<QueueId, Client> clients_;
    // Sorted by id: at most the device's depth, looked up at every
    // completion; a vector keeps its capacity, so no allocation per request.
    std::vector<InFlight> in_flight_;
    std::size_t queued_ = 0;

    // Injection bookkeeping of bfq_data: whether requests were injected since
    // the in-service queue's sample began, the request whose total service
    // time is being measured, and the most requests ever in the device.
    struct InjectState {
        bool rqs_injected = false;
        bool wait_dispatch = false;
        std::optional<RequestId> waited_rq;
        Time last_empty_occupied{};
        unsigned max_in_driver = 0;
        std::uint64_t injected = 0;
    };
    InjectState inject_;

    BfqQueue* in_service_ = nullptr;
    // A lone queue (the only busy one, its group the only busy group) that
    // runs dry with nothing in flight is expired, and its next request
    // reactivates it: on a device that answers at once (RAM), one pass out
    // of both service trees and back for every request of a lone client.
    // The same results, cheaper:
    // at the expiry only account_expiry() runs and the queue stays in the
    // trees as in service (kept); its next request sets the budget
    // activate_queue() would (resumed); the next dispatch then does
    // the trees' work in one step each (ServiceTree::restart_alone) and
    // set_in_service()'s bookkeeping. Any other event first does the trees'
    // work left undone (leave_lone), so that it meets the kernel's state.
    enum class Lone : std::uint8_t { none,
                                     kept,
                                     resumed };
    Lone lone_ = Lone::none;
    bool lone_shortcut_ = true;
    std::uint64_t lone_resumes_ = 0;
    std::optional<Time> idle_until_;   // armed idle timer
    Time idle_start_{};
    Time now_{};   // the latest time the scheduler was called with
    Time last_budget_start_{};
    Time last_idling_start_{};
    std::uint64_t last_position_ = 0;   // sector after the last dispatch
    EntityStats device_stats_;
};

}   // namespace nbdsched::sched::bfq
