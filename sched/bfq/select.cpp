// Choosing the in-service queue and ending its service: bfq_select_queue,
// bfq_bfqq_expire, __bfq_bfqq_recalc_budget, bfq_bfqq_charge_time and the
// budget helpers.
#include "sched/bfq/scheduler.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {
namespace {

constexpr std::uint64_t kDefaultMaxBudget = 16 * 1024;   // sectors
constexpr std::uint64_t kStatsMinBudgets = 194;
constexpr std::uint64_t kAsyncChargeFactor = 3;

}   // namespace

[[gnu::hot]] std::uint64_t BfqScheduler::max_budget() const {
    return budgets_assigned_ < kStatsMinBudgets ? kDefaultMaxBudget : computed_max_budget_;
}

[[gnu::hot]] std::uint64_t BfqScheduler::min_budget() const { return max_budget() / 32; }

void BfqScheduler::refresh_max_budget() {
    // update_thr_responsiveness_params: an explicit max_budget always wins.
    computed_max_budget_ = tunables_.max_budget ? tunables_.max_budget
                                                : peak_rate_.max_budget(tunables_.timeout_sync);
}

std::uint64_t BfqScheduler::async_charge(std::uint64_t sectors) const {
    // Async I/O costs three times its size unless the scenario is
    // asymmetric (then every sector must count the same).
    return asymmetric_scenario() ? sectors : sectors * kAsyncChargeFactor;
}

[[gnu::hot]] std::uint64_t BfqScheduler::budget_left(const BfqQueue& q) const {
    return q.entity.budget > q.entity.service ? q.entity.budget - q.entity.service : 0;
}

[[gnu::hot]] bool BfqScheduler::budget_timed_out(const BfqQueue& q, Time now) const {
    return now >= q.budget_timeout;
}

[[gnu::hot]] bool BfqScheduler::may_expire_for_budget_timeout(const BfqQueue& q, Time now) const {
    return (!q.wait_request || budget_left(q) >= q.entity.budget / 3) && budget_timed_out(q, now);
}

const Request* BfqScheduler::find_next_rq(BfqQueue& q, Time now) {
    SeekPolicy seek{tunables_.back_seek_max * 2, tunables_.back_seek_penalty};
    return q.next_request(last_position_, seek, tunables_.fifo_expire(q.sync()), now);
}

[[gnu::hot]] void BfqScheduler::served(BfqQueue& q, std::uint64_t sectors) {
    BfqGroup& g = group_of(q);
    g.tree.served(q.entity, sectors);
    root_.served(g.entity, sectors);
    g.stats.charged_sectors += sectors;
}

BfqQueue* BfqScheduler::set_in_service(Time now) {
    Entity* ge = root_.select();
    if (!ge) return nullptr;
    BfqGroup& g = groups_.at(GroupId(ge->key));
    Entity* qe = g.tree.select();
    if (!qe) {   // a group is only active while it has active queues
        root_.deactivate(*ge);
        return nullptr;
    }
    BfqQueue& q = queues_.at(qe->key);
    begin_service(q, now);
    return &q;
}

[[gnu::hot]] void BfqScheduler::begin_service(BfqQueue& q, Time now) {
    q.new_service_period();
    budgets_assigned_ = (budgets_assigned_ * 7 + 256) / 8;
    // bfq_set_budget_timeout (queue weights are not raised: coefficient 1).
    q.budget_timeout = now + tunables_.timeout_sync;
    last_budget_start_ = now;
    ++group_of(q).stats.slices;
    ++q.client_stats->slices;
    ++device_stats_.slices;
    in_service_ = &q;
}

[[gnu::hot]] BfqQueue* BfqScheduler::select_queue(Time now) {
    if (lone_ == Lone::resumed) restart_lone(now);
    else leave_lone();   // kept: nothing queued, so not asked (dispatch() returns first)
    // Every pass either returns or expires a queue; a freshly selected queue
    // has a budget that fits its next request, so this ends quickly.
    for (std::size_t pass = 0; pass < 2 * queues_.size() + 4; ++pass) {
        BfqQueue* q = in_service_ ? in_service_ : set_in_service(now);
        if (!q) return nullptr;
        if (may_expire_for_budget_timeout(*q, now) && !must_idle(*q)) {
            expire(*q, false, Expiry::budget_timeout, now);
            continue;
        }
        if (!q->empty()) {
            if (charge(*next_rq(*q, now), *q) > budget_left(*q)) {
                expire(*q, false, Expiry::budget_exhausted, now);
                continue;
            }
            // A small request may have arrived while idling for throughput
            // without stopping the timer; now that we dispatch, stop it.
            if (q->wait_request) stop_idling(*q, now);
            // A contended seeky queue's turn is its requests at the device.
            if (contended_seeky(*q, now) && q->dispatched >= tunables_.contended_seeky_depth) return nullptr;
            return q;
        }
        // Empty: keep the device for it if it is idling, or if requests
        // are still in flight and idling will be wanted when they end; in
        // the meantime other queues may inject (inject.cpp).
        if (q->wait_request || (q->dispatched != 0 && better_to_idle(*q))) return injection_source(*q, now);
        // A contended seeky queue kept its place after its last turn (see
        // complete()); now that it is its turn again, wait for its next
        // request if it usually comes soon (not for one held back by a limit).
        if (q->dispatched == 0 && q->has_short_ttime() && contended_seeky(*q, now) && better_to_idle(*q)) {
            arm_idle_timer(*q, now);
            return injection_source(*q, now);
        }
        expire(*q, false, Expiry::no_more_requests, now);
    }
    return nullptr;
}

[[gnu::hot]] bool BfqScheduler::is_slow(const BfqQueue& q, bool compensate, Time now,
                                        std::uint64_t& delta_ms) const {
    delta_ms = 0;
    if (!q.sync()) return false;
    bool slow = q.seeky();
    Time end = compensate ? last_idling_start_ : now;
    auto delta_us = std::uint64_t(std::max<std::int64_t>(0, (end - last_budget_start_).count())) / 1000;
    if (delta_us < 1000) {
        // Too short to measure: charge the idling a seeky queue would get
        // on flash, or one seek on a disk.
        delta_ms = device_.rotational ? std::uint64_t(tunables_.slice_idle.count()) / 1000000 : 2;
        return slow;
    }
    delta_ms = delta_us / 1000;
    // Only long intervals say something reliable about the rate; on disks
    // "slow" means under half the peak rate.
    if (delta_us > 20000) slow = q.entity.service < computed_max_budget_ / 2;
    return slow;
}

[[gnu::hot]] void BfqScheduler::charge_time(BfqQueue& q, std::uint64_t time_ms) {
    // bfq_bfqq_charge_time: a slow queue pays for the device time it held,
    // as if it had been served at peak rate (time fairness among the slow).
    std::uint64_t timeout_ms = std::max<std::uint64_t>(
        1, std::uint64_t(tunables_.timeout_sync.count()) / 1000000);
    std::uint64_t bounded = std::min(time_ms, timeout_ms);
    std::uint64_t for_time = computed_max_budget_ * bounded / timeout_ms;
    std::uint64_t total = std::max(for_time, q.entity.service);
    if (total > q.entity.budget) q.entity.budget = total;
    if (total > q.entity.service) served(q, total - q.entity.service);
}

[[gnu::hot]] void BfqScheduler::recalc_budget(BfqQueue& q, Expiry reason, Time now) {
    const std::uint64_t minb = std::max<std::uint64_t>(min_budget(), 1);
    const std::uint64_t cap = computed_max_budget_;
    std::uint64_t b = q.max_budget;
    if (q.sync()) {
        switch (reason) {
        case Expiry::too_idle:
            // Still has I/O in flight: it was not really idle, be generous.
            if (q.dispatched > 0) b = std::min(2 * b, cap);
            else b = b > 5 * minb ? b - 4 * minb : minb;
            break;
        case Expiry::budget_timeout: b = std::min(2 * b, cap); break;
        case Expiry::budget_exhausted: b = std::min(4 * b, cap); break;
        case Expiry::no_more_requests: b = std::max(q.entity.service, minb); break;
        case Expiry::preempted:
        case Expiry::seeky_turn_ended:
        case Expiry::slice_used:   // cfq's reasons: never given here
        case Expiry::closed: return;
        }
    } else {
        b = cap;
    }
    q.max_budget = b;
    if (budgets_assigned_ >= kStatsMinBudgets && tunables_.max_budget == 0)
        q.max_budget = std::min(q.max_budget, cap);
    if (!q.empty()) q.entity.budget = std::max(q.max_budget, charge(*next_rq(q, now), q));
}

void BfqScheduler::expire(BfqQueue& q, bool compensate, Expiry reason, Time now) {
    const std::uint64_t left = account_expiry(q, compensate, reason, now);
    leave_service(q, reason, left, now);
}

[[gnu::hot]] void BfqScheduler::expire_empty(BfqQueue& q, Time now) {
    if (!alone_in_trees(q)) return expire(q, false, Expiry::no_more_requests, now);
    // Kept (lone.cpp): expired but for leaving the trees, and with what
    // leave_service() would have noted for its return.
    q.budget_left_at_expiry = account_expiry(q, false, Expiry::no_more_requests, now);
    q.non_blocking_wait_rq = true;
    lone_ = Lone::kept;
}

[[gnu::hot]] std::uint64_t BfqScheduler::account_expiry(BfqQueue& q, bool compensate, Expiry reason, Time now) {
    for (EntityStats* s : {static_cast<EntityStats*>(&group_of(q).stats), q.client_stats, &device_stats_})
        s->count_expiry(reason);
    std::uint64_t delta_ms = 0;
    bool slow = is_slow(q, compensate, now, delta_ms);
    // A turn ended as a contended seeky one (seeky_so_far) pays for its time
    // like any seeky queue's, also before the queue's 20th seeky request
    // makes it BFQQ_SEEKY. Charged its sectors only, one request (64 of a
    // 32 KiB write against ~500 for 5 ms of disk), eight young random writers
    // in one group took 8 turns to 1 from an older writer of equal weight in
    // another for their first 20 turns each: about a second, 1.35:1 over a
    // 4 s run (tests/unit/sched/test_bfq_share.cpp).
    if (reason == Expiry::seeky_turn_ended) slow = true;
    if (slow || (reason == Expiry::budget_timeout && budget_left(q) >= q.entity.budget / 3))
        charge_time(q, delta_ms);
    if (reason == Expiry::too_idle && q.entity.service <= 2 * q.entity.budget / 10)
        q.io_bound = false;
    recalc_budget(q, reason, now);
    return budget_left(q);
}

void BfqScheduler::leave_service(BfqQueue& q, Expiry reason, std::uint64_t left, Time now) {
    // __bfq_bfqq_expire: requeue or deactivate along the path to the root.
    BfqGroup& g = group_of(q);
    // __bfq_bfqq_expire (Linux 5.3+, "re-schedule empty queues if they
    // deserve I/O plugging"): a queue preempted while it waits for its next
    // request, and owed idling for its share, stays scheduled with its
    // timestamps. Leaving would let the preemptor's group run the virtual
    // time past it, so that its return looks like a service hole and
    // preempts back: two groups then alternate one request at a time and
    // the weights are lost (two sequential writers 1000:100 on a disk got
    // exactly what `none` gives them, 11.4:11.4 MiB/s, in one run of three).
    // On flash injection fills the think times instead, and a preempted
    // queue kept scheduled there holds its group ahead of injected ones
    // (measured: 1:1 on a one-channel device), so flash keeps the 4.x rule.
    // A contended seeky queue whose turn ended keeps its place the same way.
    const bool keep_scheduled = q.empty() && device_.rotational &&
                                (reason == Expiry::preempted || reason == Expiry::seeky_turn_ended) &&
                                !q.closed && idling_needed_for_service_guarantees(q);
    // On flash the preempted queue leaves, but its group still counts as
    // pending for the in-time window: else, when the preemptor's request
    // completes, nobody else seems to wait, the preemptor is not idled for,
    // the preempted group is served, and the heavier one preempts it again
    // at its next request: one request each, 1:1 at 1000:100 (ssd, two qd1
    // writers, the light one started first).
    if (reason == Expiry::preempted && q.empty() && !keep_scheduled && !q.closed &&
        idling_needed_for_service_guarantees(q))
        g.preempted_until = now + 3 * guarantee_idle();
    if (q.empty() && !keep_scheduled) g.tree.deactivate(q.entity);
    else g.tree.requeue(q.entity);
    if (g.tree.empty()) {
        root_.deactivate(g.entity);
    } else {
        g.entity.budget = g.tree.peek()->budget;
        root_.requeue(g.entity);
    }
    if (q.wait_request) stop_idling(q, now);
    in_service_ = nullptr;

    // Waiting for its next request only: remember the budget it had left,
    // so that an in-time arrival continues the same budget.
    q.non_blocking_wait_rq = !q.entity.busy() && reason != Expiry::budget_timeout &&
                             reason != Expiry::budget_exhausted;
    q.budget_left_at_expiry = q.non_blocking_wait_rq ? left : 0;
    maybe_forget(q);   // may destroy q: callers must not touch it afterwards
}

void BfqScheduler::maybe_preempt(BfqQueue& arrived, bool wants_to_preempt, Time now) {
    // bfq_bfqq_handle_idle_busy_switch: the in-service queue yields when
    // the newcomer has a service hole to recover, belongs to a heavier
    // group, or plugging is not needed any more; and only if the newcomer's
    // group could be the next one B-WF2Q+ serves (next_queue_may_preempt).
    BfqQueue* cur = in_service_;
    if (!cur || cur == &arrived || cur->group() == arrived.group()) return;
    const BfqGroup& ga = group_of(arrived);
    const BfqGroup& gc = group_of(*cur);
    bool heavier = ga.entity.weight > gc.entity.weight;
    // Where injection runs (flash), a service hole alone preempts only if the
    // group is eligible at the current virtual time: peek() jumps the virtual
    // time to the smallest start, so a lone waiting light group would always
    // qualify and, at iodepth 1, take every think time of the heavy one.
    // Injection serves it instead, when it is its turn.
    bool hole = wants_to_preempt && (device_.rotational || !vtime_after(ga.entity.start, root_.vtime()));
    if (!(hole || heavier || !better_to_idle(*cur))) return;
    if (root_.peek() != &ga.entity) return;
    expire(*cur, false, Expiry::preempted, now);
}

}   // namespace nbdsched::sched::bfq
