// Idling decisions, as coded in Linux 4.x CFQ after the seed-003 fix:
// cfq_should_idle, cfq_arm_slice_timer, cfq_should_wait_busy, the idle slice
// timer, cfq_update_idle_window and hw_tag (NCQ) detection.
#include <algorithm>

#include "sched/cfq/cfq_scheduler.hpp"
#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {
namespace {

// req_noidle(): a sync write that says "more is not coming" (REQ_SYNC
// without REQ_IDLE). NBD carries no such hint; we read FUA writes and
// flushes as that (journal commits), other sync writes as O_DIRECT (idle ok).
bool req_noidle(const Request& r) {
    return r.op == Op::flush || (r.op == Op::write && r.sync && r.fua);
}

}   // namespace

[[gnu::hot]] bool CfqScheduler::should_idle(const CfqQueue& q) const {
    if (t_.slice_idle == Nanos{}) return false;
    // Queues marked with an idle window, except on a queueing SSD.
    if (q.idle_window && !(!device_.rotational && hw_tag())) return true;
    // Otherwise only the last queue of its service tree ("tree idle" for
    // the sync-noidle tree), if the tree's think time is small.
    if (q.tree && q.tree->count() == 1 && q.sync && !q.tree->ttime.big(t_.slice_idle)) return true;
    return false;
}

[[gnu::hot]] void CfqScheduler::arm_slice_timer(Time now) {
    CfqQueue& q = *active_;
    // A queueing SSD does not idle -- unless group_idle is set (seed 003):
    // without it, a group whose queue empties loses its turn and the group
    // weights stop mattering.
    if (!device_.rotational && hw_tag() && t_.group_idle == Nanos{}) return;

    Nanos group_idle{};
    if (!should_idle(q)) {
        if (t_.group_idle > Nanos{}) group_idle = t_.group_idle;   // idle for the group instead
        else return;
    }
    if (q.dispatched) return;   // still requests in flight: completion will decide
    if (q.closed) return;       // the client went away
    // Think time longer than what is left of the slice: idling cannot pay.
    if (q.ttime.valid() && q.slice_end - now < q.ttime.mean) return;
    // Group idle only for a group's last queue with a short think time.
    if (group_idle > Nanos{} &&
        (q.group->nr_cfqq > 1 || (q.tree && q.tree->ttime.big(t_.group_idle))))
        return;

    q.wait_request = true;
    start_timer(group_idle > Nanos{} ? group_idle : t_.slice_idle, now);
}

[[gnu::hot]] bool CfqScheduler::should_wait_busy(const CfqQueue& q, Time now) const {
    if (!q.empty()) return false;
    if (q.group->nr_cfqq > 1) return false;
    if (q.group->ttime.big(t_.group_idle)) return false;
    if (slice_used(q, now)) return true;
    if (q.ttime.valid() && q.slice_end - now < q.ttime.mean) return true;
    // Think time under a jiffy reads as 0 above; also wait when at most one
    // jiffy of slice is left.
    return q.slice_end - now <= kJiffy;
}

void CfqScheduler::idle_timer_fired(Time now) {
    cancel_timer(now);
    bool timed_out = true;
    Expiry why = Expiry::too_idle;
    if (CfqQueue* q = active_) {
        timed_out = false;
        if (q->must_dispatch) return;   // a request came: let it through
        if (!slice_used(*q, now)) {
            if (!busy_queues_) return;
            if (!q->empty()) return;   // not expired and has work: dispatch
            q->deep = false;           // idling did not pay off
        } else {
            why = used_up(*q);   // the slice (or wait_busy's extension of it) ran out while idling
        }
    }
    slice_expired(now, timed_out, why);
}

[[gnu::hot]] void CfqScheduler::update_idle_window(CfqQueue& q) {
    if (!q.sync) return;
    bool enable = q.idle_window;
    if (q.queued() >= 4) q.deep = true;
    if (const auto* next = q.next(); next && req_noidle(next->req)) enable = false;
    else if (q.closed || t_.slice_idle == Nanos{} || (!q.deep && q.seeky())) enable = false;
    else if (q.ttime.valid()) enable = q.ttime.mean <= t_.slice_idle;
    q.idle_window = enable;
}

[[gnu::hot]] void CfqScheduler::update_hw_tag() {
    // Peak depth in the driver over 50 samples taken under enough load.
    hw_tag_est_depth_ = std::max(hw_tag_est_depth_, rq_in_driver_);
    if (hw_tag_ == 1) return;
    if (rq_queued_ <= kHwQueueMin && rq_in_driver_ <= kHwQueueMin) return;
    // An idling queue with few requests cannot fill the device: no sample.
    if (active_ && active_->idle_window &&
        active_->dispatched + int(active_->queued()) < kHwQueueMin && rq_in_driver_ < kHwQueueMin)
        return;
    if (hw_tag_samples_++ < kHwTagSamples) return;
    hw_tag_ = hw_tag_est_depth_ >= kHwQueueMin ? 1 : 0;
}

}   // namespace nbdsched::sched::cfq
