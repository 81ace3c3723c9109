// The seam's entry points: groups, queues, submit/dispatch/complete, tunables.
#include "sched/cfq/cfq_scheduler.hpp"

#include <algorithm>

#include "sched/cfq/cfq.hpp"
#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {

using namespace std::chrono_literals;

CfqScheduler::CfqScheduler(const DeviceTraits& device, const CfqTunables& tunables)
    : device_(device), t_(tunables) {
    if (device_.max_depth == 0) device_.max_depth = 1;
}

CfqScheduler::~CfqScheduler() = default;

// Every event first brings the clock forward and fires a due idle timer, at
// the time it was due, so the order of events is the kernel's.
[[gnu::hot]] void CfqScheduler::advance(Time now) {
    if (!clock_started_) {
        clock_started_ = true;
        now_ = now;
        // "Sync was last delayed a second ago": async starts with some depth.
        last_delayed_sync_ = now - 1s;
    }
    if (timer_ && *timer_ <= now) idle_timer_fired(std::max(*timer_, now_));
    now_ = std::max(now_, now);
}

CfqGroup& CfqScheduler::group(GroupId id) {
    auto& g = groups_[id];
    if (!g) g = std::make_unique<CfqGroup>(id, kDefaultWeight, now_, &pool_);
    return *g;
}

void CfqScheduler::set_group(GroupId id, unsigned weight) {
    weight = std::clamp(weight, kMinWeight, kMaxWeight);
    CfqGroup& g = group(id);
    // An active group keeps its weight in the root's sum until it is
    // re-activated (next time it is charged), as cfq_update_group_weight does.
    if (g.on_tree) g.new_weight = weight;
    else g.weight = weight;
    g.stats.weight = weight;
}

void CfqScheduler::open_queue(QueueId id, GroupId gid, Time now) {
    advance(now);
    last_sync_ = nullptr;   // the client's queue may be replaced below
    auto& q = queues_[id];
    if (q && q->group->id != gid) {
        // A client that moved to another group gets a fresh queue there; what
        // it still has queued or in flight finishes in the old group (as the
        // kernel's check_blkcg_changed drops the old queue).
        q->closed = true;
        if (active_ == q.get()) expire_queue(*q, now, false, Expiry::closed);
        retired_.push_back(std::move(q));
    }
    if (!q) q = std::make_unique<CfqQueue>(next_queue_key_++, id, &group(gid), true, now, &pool_);
    q->closed = false;
    closed_.erase(id);
    reap_closed();
}

void CfqScheduler::close_queue(QueueId id, Time now) {
    advance(now);
    auto it = queues_.find(id);
    if (it == queues_.end()) return;
    CfqQueue& q = *it->second;
    if (q.closed) return;   // closed again behind a late request: it keeps its turn
    q.closed = true;
    closed_.insert(id);
    if (active_ == &q) expire_queue(q, now, false, Expiry::closed);
    reap_closed();
}

[[gnu::hot]] std::vector<CfqScheduler::InFlight>::iterator CfqScheduler::in_flight_slot(RequestId id) {
    return std::lower_bound(in_flight_.begin(), in_flight_.end(), id,
                            [](const InFlight& f, RequestId key) { return f.id < key; });
}

void CfqScheduler::reap_drained() {
    std::vector<QueueId> reaped;
    std::erase_if(retired_, [this, &reaped](const std::unique_ptr<CfqQueue>& q) {
        if (!(q->empty() && !q->dispatched && !q->on_rr && active_ != q.get())) return false;
        if (q->client) reaped.push_back(*q->client);
        return true;
    });
    for (auto it = closed_.begin(); it != closed_.end();) {
        auto qit = queues_.find(*it);
        if (qit == queues_.end()) {
            it = closed_.erase(it);
            continue;
        }
        const CfqQueue& q = *qit->second;
        if (q.empty() && !q.dispatched && !q.on_rr && active_ != &q) {
            reaped.push_back(*it);
            if (last_sync_ == &q) last_sync_ = nullptr;
            queues_.erase(qit);
            it = closed_.erase(it);
        } else {
            ++it;
        }
    }
    for (QueueId client : reaped) forget_client_stats(client);
}

[[gnu::hot]] CfqQueue& CfqScheduler::queue_for(const Request& req, Time now) {
    if (!last_sync_ || *last_sync_->client != req.queue) {
        auto it = queues_.find(req.queue);
        // Only the driver's open_queue() opens a client: a request that
        // reaches a closed queue (a layer above held it past the close) joins
        // it closed; one whose queue is gone (closed and freed already, or
        // never opened) gets a queue that its requests alone hold, as the
        // kernel's request holds its cfqq after the task exited. Either is
        // freed once drained.
        if (it == queues_.end()) {
            open_queue(req.queue, req.group, now);
            it = queues_.find(req.queue);
            it->second->closed = true;
            closed_.insert(req.queue);
        }
        last_sync_ = it->second.get();
    }
    if (req.sync) return *last_sync_;
    // Async requests go to the group's shared async queue, as in the kernel.
    CfqGroup& g = *last_sync_->group;
    if (!g.async_queue)
        g.async_queue =
            std::make_unique<CfqQueue>(next_queue_key_++, std::nullopt, &g, false, now, &pool_);
    return *g.async_queue;
}

[[gnu::hot]] void CfqScheduler::submit(const Request& req, Time now) {
    advance(now);
    CfqQueue& q = queue_for(req, now);
    q.add(req, now + t_.fifo_expire(req.sync), last_position_, elevator());
    if (!q.on_rr) add_rr(q, now);
    rq_enqueued(q, req, now);
}

// cfq_rq_enqueued: update the heuristics, then end idling or preempt.
[[gnu::hot]] void CfqScheduler::rq_enqueued(CfqQueue& q, const Request& req, Time now) {
    ++rq_queued_;
    if (q.sync) {
        q.ttime.update(now, t_.slice_idle);
        if (q.tree) q.tree->ttime.update(now, t_.slice_idle);
    }
    q.group->ttime.update(now, t_.group_idle);
    q.update_seek(req, device_.rotational);
    update_idle_window(q);
    q.last_request_pos = req.offset / 512 + req.sectors();

    if (&q == active_) {
        // The request we idled for. (The kernel holds back requests of at
        // most a page when alone, to let them merge; there is no merging
        // here, so it always goes right away.)
        if (q.wait_request) {
            cancel_timer(now);
            q.wait_request = false;
        }
    } else if (should_preempt(q, req, now)) {
        preempt_queue(q, now);
    }
}

[[gnu::hot]] std::optional<Request> CfqScheduler::dispatch(Time now) {
    advance(now);
    if (rq_in_driver_ >= int(device_.max_depth) || !busy_queues_) return std::nullopt;
    CfqQueue* q = select_queue(now);
    if (!q) return std::nullopt;
    auto req = dispatch_request(*q, now);
    if (!req) return std::nullopt;
    ++q->slice_dispatch;
    q->slice_charge += iops_charge(*req);
    q->must_dispatch = false;
    // An async queue that used its request budget yields when others wait.
    if (busy_queues_ > 1 && !q->sync &&
        q->slice_dispatch >= 2 * std::uint64_t(t_.slice_async_rq) * (kIoprioBeNr - kIoprio)) {
        q->slice_end = now + Nanos(1);
        slice_expired(now, false, Expiry::budget_exhausted);
    }
    reap_closed();
    return req;
}

[[gnu::hot]] void CfqScheduler::complete(RequestId id, Time now) {
    advance(now);
    auto it = in_flight_slot(id);
    if (it == in_flight_.end() || it->id != id) return;
    CfqQueue& q = *it->queue;
    const Request req = it->req;
    EntityStats* client = completion_stats(*it);
    in_flight_.erase(it);

    update_hw_tag();
    --rq_in_driver_;
    --q.dispatched;
    --q.group->dispatched;
    --rq_in_flight_[q.sync ? 1 : 0];
    for (EntityStats* s : {&device_stats_, static_cast<EntityStats*>(&q.group->stats), client})
        if (s) ++s->completed;

    if (req.sync) {
        q.ttime.last_end_request = now;
        QueueTree& st = q.on_rr && q.tree ? *q.tree : q.group->tree(q.type());
        st.ttime.last_end_request = now;
        if (req.arrival + t_.fifo_expire_sync <= now) last_delayed_sync_ = now;
    }
    q.group->ttime.last_end_request = now;

    if (active_ == &q) {
        const bool empty = q.empty();
        // The slice starts at the first completion, not at the first dispatch.
        if (q.slice_new) {
            set_prio_slice(q, now);
            q.slice_new = false;
        }
        // Keep the slice alive a little so the group stays backlogged.
        if (should_wait_busy(q, now)) {
            q.slice_end = now + (t_.slice_idle > Nanos{} ? t_.slice_idle : t_.group_idle);
            q.wait_busy = true;
        }
        if (slice_used(q, now)) slice_expired(now, true, used_up(q));
        else if (req.sync && empty) arm_slice_timer(now);
    }
    // A closed queue's last request lets it go, active or not, as the
    // kernel's cfq_put_queue expires the active queue when its last
    // reference goes: nothing would come to end its slice.
    if (q.closed && active_ == &q && q.empty() && !q.dispatched) expire_queue(q, now, false, Expiry::closed);
    reap_closed();
}

std::vector<std::string> CfqScheduler::tunable_names() const { return table().names(); }

std::optional<std::string> CfqScheduler::get_tunable(std::string_view name) const { return table().get(t_, name); }

std::string CfqScheduler::set_tunable(std::string_view name, std::string_view value, Time now) {
    advance(now);
    return table().set(t_, device_, name, value);   // a bad value leaves t_ as it was
}

}   // namespace nbdsched::sched::cfq

namespace nbdsched::sched {

std::unique_ptr<Scheduler> make_cfq(const DeviceTraits& device, const Tunables& tunables,
                                    std::string& error) {
    auto t = cfq::table().build(device, tunables, error);
    return t ? std::make_unique<cfq::CfqScheduler>(device, *t) : nullptr;
}

}   // namespace nbdsched::sched
