// Choosing what to serve: group (smallest vdisktime) -> workload type ->
// queue, keeping the active queue while it may still use its slice
// (cfq_select_queue, cfq_choose_cfqg, choose_wl_class_and_type), and ending
// slices (__cfq_slice_expired) and preemption (cfq_should_preempt).
#include "sched/cfq/cfq_scheduler.hpp"
#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {

[[gnu::hot]] CfqQueue* CfqScheduler::select_queue(Time now) {
    CfqQueue* q = active_;
    Expiry why = Expiry::no_more_requests;   // unless a slice that ran out says otherwise
    if (!q) goto new_queue;
    if (!rq_queued_) return nullptr;

    // We were waiting for the group to get backlogged: it did, move on.
    // (wait_busy kept a slice that was used up, or nearly, alive.)
    if (q->wait_busy && !q->empty()) {
        why = used_up(*q);
        goto expire;
    }

    if (slice_used(*q, now) && !q->must_dispatch) {
        // The slice ran out while we idled for this queue: let its in-flight
        // request finish so the group stays backlogged.
        if (q->group->nr_cfqq == 1 && q->empty() && q->dispatched && should_idle(*q))
            return nullptr;
        why = used_up(*q);
        goto check_group_idle;
    }

    if (!q->empty()) return q;

    // A seeky queue serving one request while another group waits
    // (contended_seeky_depth) keeps the device until that request is done:
    // its slice ends there, charged the time since it was scheduled in.
    // Expired now, empty, it would be charged one jiffy, and its group would
    // put its next queue's request at the disk too, and the next: the other
    // group waited behind several requests and was charged their time.
    if (holds_device_for_seeky_request(*q)) return nullptr;

    // (Close cooperators are not modelled.) Idling: wait for the timer.
    if (timer_) return nullptr;

    // A seeky queue with a deep window on a device that outruns it: stop idling.
    if (q->seeky() && q->idle_window &&
        (q->slice_new || (q->slice_end - now > now - q->slice_start.value_or(now)))) {
        q->deep = false;
        q->idle_window = false;
    }

    if (q->dispatched && should_idle(*q)) return nullptr;

check_group_idle:
    // Group idle: the group's only queue still has I/O in flight; wait for it
    // so the group keeps its turn.
    if (t_.group_idle > Nanos{} && q->group->nr_cfqq == 1 && q->group->dispatched &&
        !q->group->ttime.big(t_.group_idle))
        return nullptr;

expire:
    slice_expired(now, false, why);
new_queue:
    choose_cfqg(now);
    set_active_queue(get_next_queue(), now);
    return active_;
}

void CfqScheduler::choose_cfqg(Time now) {
    CfqGroup* g = grp_tree_.first();
    grp_tree_.update_min_vdisktime();
    serving_group_ = g;
    if (!g) return;
    // Restore the workload the group was serving when it was last expired.
    if (g->saved_wl_slice > Nanos{}) {
        workload_expires_ = now + g->saved_wl_slice;
        serving_type_ = g->saved_wl_type;
    } else {
        workload_expires_ = now - Nanos(1);
    }
    choose_wl_type(*g, now);
}

void CfqScheduler::choose_wl_type(CfqGroup& g, Time now) {
    // Only the BE class exists, so the class never changes.
    if (g.tree(serving_type_).count() && !(now > workload_expires_)) return;
    // The workload whose first queue has waited longest (lowest rb_key).
    WlType best = WlType::sync_noidle;
    bool valid = false;
    std::int64_t lowest = 0;
    for (int i = 0; i < kWlTypes; ++i) {
        CfqQueue* first = g.trees[std::size_t(i)].first();
        if (first && (!valid || first->rb_key < lowest)) {
            lowest = first->rb_key;
            best = WlType(i);
            valid = true;
        }
    }
    serving_type_ = best;
    workload_expires_ = now + workload_slice(g, best);
}

CfqQueue* CfqScheduler::get_next_queue() const {
    if (!rq_queued_ || !serving_group_) return nullptr;
    return serving_group_->tree(serving_type_).first();
}

void CfqScheduler::set_active_queue(CfqQueue* q, Time now) {
    if (q) {
        q->slice_start.reset();
        q->dispatch_start = now;
        q->allocated_slice = Nanos{};
        q->slice_end = Time{};
        q->slice_dispatch = 0;
        q->slice_charge = 0;
        q->wait_request = false;
        q->must_dispatch = false;
        q->fifo_expire = false;
        q->slice_new = true;
        q->seeky_slice = false;
        cancel_timer(now);
        ++q->group->stats.slices;
        ++device_stats_.slices;
        if (q->client) ++client_stats(*q).slices;
    }
    active_ = q;
}

void CfqScheduler::slice_expired(Time now, bool timed_out, Expiry why) {
    if (active_) expire_queue(*active_, now, timed_out, why);
}

void CfqScheduler::expire_queue(CfqQueue& q, Time now, bool timed_out, Expiry why) {
    // Only the active queue is expired, and set_active_queue() found a sync
    // queue's client_stats; a group's async queue has none.
    device_stats_.count_expiry(why);
    q.group->stats.count_expiry(why);
    if (q.client_stats) q.client_stats->count_expiry(why);
    if (q.wait_request) cancel_timer(now);
    q.wait_request = false;
    q.wait_busy = false;
    // Remember what was left of the slice if the queue idled or was preempted.
    if (timed_out) {
        if (q.slice_new) q.slice_resid = scaled_slice(q).count();
        else q.slice_resid = (q.slice_end - now).count();
    }
    group_served(*q.group, q, now);
    if (q.on_rr && q.empty()) del_rr(q);
    resort_rr_list(q, now);
    if (active_ == &q) active_ = nullptr;
}

bool CfqScheduler::should_preempt(const CfqQueue& q, const Request& req, Time now) const {
    const CfqQueue* a = active_;
    if (!a) return false;
    // A sync request beats an async slice, even across groups.
    if (req.sync && !a->sync && !a->must_dispatch) return true;
    // Otherwise never across groups: that would break the groups' fairness.
    if (a->group != q.group) return false;
    // Nor while a contended seeky queue's request is at the disk: the other
    // group's turn comes at its completion (select_queue).
    if (holds_device_for_seeky_request(*a)) return false;
    if (slice_used(*a, now)) return true;
    // Both on the sync-noidle tree and the active one is only tree-idling.
    if (serving_type_ == WlType::sync_noidle && q.type() == WlType::sync_noidle && a->empty())
        return true;
    if (a->empty() && !should_idle(*a)) return true;
    if (!a->wait_request) return false;
    // As good as the request we are idling for: close to the head.
    const std::uint64_t pos = req.offset / 512;
    const std::uint64_t dist = pos >= last_position_ ? pos - last_position_ : last_position_ - pos;
    return dist <= kCloseThr;
}

void CfqScheduler::preempt_queue(CfqQueue& q, Time now) {
    const WlType old_type = active_->type();
    slice_expired(now, true, Expiry::preempted);
    // A different workload type: do not restore the old one, or the
    // preemption would not happen.
    if (old_type != q.type()) q.group->saved_wl_slice = Nanos{};
    service_tree_add(q, true, now);
    q.slice_end = Time{};
    q.slice_new = true;
}

}   // namespace nbdsched::sched::cfq
