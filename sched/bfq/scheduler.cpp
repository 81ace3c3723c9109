// BfqScheduler: request events and bookkeeping. The policy decisions live
// in select.cpp (which queue, when to expire) and idle.cpp (when to plug).
#include "sched/bfq/scheduler.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {

BfqScheduler::BfqScheduler(const DeviceTraits& device, const BfqTunables& tunables)
    : device_(device),
      tunables_(tunables),
      computed_max_budget_(tunables.max_budget ? tunables.max_budget : 16 * 1024),
      peak_rate_(device.rotational) {
    device_.max_depth = std::max(device_.max_depth, 1u);
}

BfqGroup& BfqScheduler::group(GroupId id) {
    auto [it, created] = groups_.try_emplace(id, &pool_);
    if (created) {
        it->second.entity.key = id;
        it->second.entity.weight = 100;   // BFQ's default group weight
        it->second.stats.weight = 100;
    }
    return it->second;
}

void BfqScheduler::set_group(GroupId id, unsigned weight) {
    leave_lone();
    BfqGroup& g = group(id);
    weight = std::clamp(weight, 1u, 1000u);
    root_.reweight(g.entity, weight);
    g.stats.weight = weight;
}

void BfqScheduler::open_queue(QueueId id, GroupId gid, Time) {
    leave_lone();
    group(gid);
    Client& c = clients_[id];
    c.open = true;
    if (c.group != gid) {
        // Moving a client: its idle internal queues are rebuilt in the new
        // group; busy ones finish where they are.
        for (bool sync : {true, false}) {
            auto it = queues_.find(queue_key(id, sync));
            if (it == queues_.end()) continue;
            BfqQueue& q = it->second;
            if (!q.entity.busy() && q.dispatched == 0) {
                groups_.at(q.group()).tree.remove(q.entity);
                queues_.erase(it);
            }
        }
        c.group = gid;
    }
    for (bool sync : {true, false}) {
        auto it = queues_.find(queue_key(id, sync));
        if (it != queues_.end()) it->second.closed = false;
    }
}

void BfqScheduler::close_queue(QueueId id, Time now) {
    leave_lone();
    auto c = clients_.find(id);
    if (c == clients_.end()) return;
    c->second.open = false;
    forget_client(id);   // if it has no queue left, else when the last goes
    for (bool sync : {true, false}) {
        auto it = queues_.find(queue_key(id, sync));
        if (it == queues_.end()) continue;
        BfqQueue& q = it->second;
        q.closed = true;   // no process references: never idle for it again
        if (in_service_ == &q && q.wait_request) {
            stop_idling(q, now);
            if (q.empty()) {
                expire(q, false, Expiry::no_more_requests, now);   // may destroy q
                continue;
            }
        }
        maybe_forget(q);
    }
}

[[gnu::hot]] std::vector<BfqScheduler::InFlight>::iterator BfqScheduler::in_flight_slot(RequestId id) {
    return std::lower_bound(in_flight_.begin(), in_flight_.end(), id,
                            [](const InFlight& f, RequestId key) { return f.id < key; });
}

[[gnu::hot]] BfqQueue& BfqScheduler::queue_for(const Request& r, Time now) {
    // The usual case first: the queue exists (then so does its client, which
    // is forgotten only with its queues) and its client has not moved.
    if (auto it = queues_.find(queue_key(r.queue, r.sync));
        it != queues_.end() && it->second.group() == *it->second.client_group)
        return it->second;
    auto c = clients_.find(r.queue);
    if (c == clients_.end()) {
        // Queues are opened before their first request, so this client was
        // closed and forgotten, and a layer above released a request of it
        // late: it is served closed, and forgotten again when it drains.
        open_queue(r.queue, r.group, now);
        c = clients_.find(r.queue);
        c->second.open = false;
    }
    std::uint64_t key = queue_key(r.queue, r.sync);
    auto it = queues_.find(key);
    if (it != queues_.end() && it->second.group() != c->second.group &&
        !it->second.entity.busy() && it->second.dispatched == 0) {
        // The client moved to another group while this queue was busy; now
        // that it is idle, rebuild it where the client lives.
        groups_.at(it->second.group()).tree.remove(it->second.entity);
        queues_.erase(it);
        it = queues_.end();
    }
    if (it == queues_.end()) {
        it = queues_.try_emplace(key, key, r.queue, c->second.group, r.sync, &pool_).first;
        it->second.client_stats = &c->second.stats;
        it->second.client_group = &c->second.group;
        it->second.home = &groups_.at(c->second.group);
        it->second.max_budget = 2 * max_budget() / 3;   // bfq_init_bfqq
        it->second.closed = !c->second.open;
        it->second.note_completion(now);   // a new queue counts as just served
        it->second.decrease_time = now;
    }
    return it->second;
}

[[gnu::hot]] void BfqScheduler::submit(const Request& r, Time now) {
    // A kept lone queue's own request resumes it (lone.cpp); for the kernel
    // it was expired and is not busy.
    const bool resumes = lone_ == Lone::kept && resumes_lone(r);
    if (!resumes) leave_lone();
    process_timer(now);
    // resumes_lone() matched the queue queue_for() would find: no lookup.
    BfqQueue& q = resumes ? *in_service_ : queue_for(r, now);
    BfqGroup& g = group_of(q);
    q.note_arrival(r, now, !device_.rotational, tunables_.slice_idle);
    const bool was_busy = q.entity.busy() && !resumes;
    q.add(r, now);
    inject_on_arrival(q, in_service_ == &q && !resumes, now);
    ++queued_;
    ++g.pending;
    ++g.stats.queued;
    ++q.client_stats->queued;
    ++device_stats_.queued;

    if (resumes) return resume_lone(q, now);
    if (!was_busy) {
        activate_queue(q, now);
        return;
    }
    if (in_service_ == &q && q.wait_request) {
        // bfq_rq_enqueued: a lone small request does not end idling that is
        // only for throughput (more may follow to merge); anything else does.
        bool small = q.size() == 1 && r.sectors() < 32;
        bool timed_out = budget_timed_out(q, now);
        if (small && idling_boosts_thr_without_issues(q) && !timed_out) return;
        stop_idling(q, now);
        if (timed_out) expire(q, false, Expiry::budget_timeout, now);
    }
}

[[gnu::hot]] bool BfqScheduler::arrives_in_time(const BfqQueue& q, Time now) const {
    Nanos window = tunables_.slice_idle.count() ? tunables_.slice_idle : guarantee_idle();
    return now <= q.last_end_request() + 3 * window;
}

[[gnu::hot]] void BfqScheduler::note_busy_again(BfqQueue& q, bool in_time) {
    if (q.io_bound) return;
    if (in_time && ++q.requests_within_timer >= 120) q.io_bound = true;
    if (!in_time) q.requests_within_timer = 0;
}

void BfqScheduler::activate_queue(BfqQueue& q, Time now) {
    const bool wants_to_preempt = activation_budget(q, now);
    enter_trees(q);
    maybe_preempt(q, wants_to_preempt, now);
}

[[gnu::hot]] bool BfqScheduler::activation_budget(BfqQueue& q, Time now) {
    // bfq_bfqq_handle_idle_busy_switch
    const bool in_time = arrives_in_time(q, now);
    note_busy_again(q, in_time);
    if (q.non_blocking_wait_rq && in_time && q.budget_left_at_expiry > 0) {
        // It only paused waiting for its next request: resume the old
        // budget with back-shifted timestamps, and reclaim the device.
        q.entity.budget = std::min(q.budget_left_at_expiry, q.max_budget);
        return true;
    }
    q.entity.budget = std::max(q.max_budget, charge(*next_rq(q, now), q));
    q.non_blocking_wait_rq = false;
    return false;
}

void BfqScheduler::enter_trees(BfqQueue& q) {
    BfqGroup& g = group_of(q);
    g.tree.activate(q.entity, q.non_blocking_wait_rq);
    q.non_blocking_wait_rq = false;
    if (!g.entity.busy()) {
        g.entity.budget = g.tree.peek()->budget;
        root_.activate(g.entity);
    }
}

[[gnu::hot]] std::optional<Request> BfqScheduler::dispatch(Time now) {
    process_timer(now);
    if (queued_ == 0 || in_flight_.size() >= device_.max_depth) return std::nullopt;
    // strict_guarantees: the device serves one request at a time.
    if (tunables_.strict_guarantees && !in_flight_.empty()) return std::nullopt;
    BfqQueue* q = select_queue(now);
    if (!q) return std::nullopt;
    const bool injected = q != in_service_;
    const Request* next = next_rq(*q, now);
    Request r = q->take(*next);
    BfqGroup& g = group_of(*q);
    --queued_;
    ++q->dispatched;
    auto slot = in_flight_slot(r.id);
    if (slot != in_flight_.end() && slot->id == r.id) *slot = InFlight{r.id, q, r.sectors()};
    else in_flight_.insert(slot, InFlight{r.id, q, r.sectors()});
    served(*q, charge(r, *q));
    inject_on_dispatch(*q, r.id);

    std::uint64_t sector = r.offset / 512;
    std::uint64_t dist = sector > last_position_ ? sector - last_position_ : last_position_ - sector;
    bool seeky = dist > 800 && (device_.rotational || r.sectors() < 64);
    if (peak_rate_.on_dispatch(r.sectors(), seeky, now, unsigned(in_flight_.size() - 1))) {
        peak_rate_known_ = true;
        refresh_max_budget();
    }
    last_position_ = sector + r.sectors();

    for (EntityStats* s : {static_cast<EntityStats*>(&g.stats), q->client_stats, &device_stats_}) {
        ++s->dispatched;
        s->dispatched_sectors += r.sectors();
        --s->queued;
        ++s->in_flight;
    }
    if (injected) {
        ++inject_.injected;
        retire_drained(*q);   // may destroy q
    }
    return r;
}

[[gnu::hot]] void BfqScheduler::complete(RequestId id, Time now) {
    leave_lone();
    process_timer(now);
    auto it = in_flight_slot(id);
    if (it == in_flight_.end() || it->id != id) return;
    BfqQueue& q = *it->queue;
    bool small = in_service_ && in_service_->has_short_ttime() &&
                 in_service_->dispatched + in_service_->size() < 3;
    hw_tag_.sample(unsigned(in_flight_.size()), queued_, small);
    inject_on_completion(q, id, now);
    in_flight_.erase(it);
    --q.dispatched;
    BfqGroup& g = group_of(q);
    --g.pending;
    g.recent_until = now + 3 * guarantee_idle();
    for (EntityStats* s : {static_cast<EntityStats*>(&g.stats), q.client_stats, &device_stats_}) {
        ++s->completed;
        --s->in_flight;
    }
    q.note_completion(now);
    if (peak_rate_.on_completion(now)) {
        peak_rate_known_ = true;
        refresh_max_budget();
    }

    if (in_service_ == &q) {
        if (q.dispatched == 0 && contended_seeky(q, now)) {
            // Its turn ends with its requests: charged for the time it held
            // the device, it stays scheduled and B-WF2Q+ picks the next turn.
            expire(q, false, Expiry::seeky_turn_ended, now);
            return;
        }
        if (must_idle(q)) {
            // Keep the queue even if its budget timed out: it is owed the
            // idling (bfq_completed_request).
            if (q.dispatched == 0) arm_idle_timer(q, now);
            return;
        }
        if (may_expire_for_budget_timeout(q, now))
            expire(q, false, Expiry::budget_timeout, now);
        else if (q.empty() && (q.dispatched == 0 || !better_to_idle(q)))
            expire_empty(q, now);
        return;
    }
    maybe_forget(q);
}

void BfqScheduler::maybe_forget(BfqQueue& q) {
    if (!q.closed || q.entity.busy() || q.dispatched != 0 || in_service_ == &q) return;
    const QueueId client = q.client();
    group_of(q).tree.remove(q.entity);
    queues_.erase(q.key());
    forget_client(client);
}

void BfqScheduler::forget_client(QueueId id) {
    // Its queues point into its entry (client_stats): only once both are gone.
    auto c = clients_.find(id);
    if (c == clients_.end() || c->second.open) return;
    if (queues_.contains(queue_key(id, true)) || queues_.contains(queue_key(id, false))) return;
    clients_.erase(c);
}

void BfqScheduler::idle_timer_fired(Time now) {
    if (!in_service_) {
        idle_until_.reset();
        return;
    }
    // bfq_idle_slice_timer_body
    BfqQueue& q = *in_service_;
    stop_idling(q, *idle_until_);
    if (budget_timed_out(q, now)) expire(q, true, Expiry::budget_timeout, now);
    else if (q.empty()) expire(q, true, Expiry::too_idle, now);
}

[[gnu::hot]] std::optional<Time> BfqScheduler::next_wakeup() const { return idle_until_; }

}   // namespace nbdsched::sched::bfq
