// Dispatch limits and moving one request to the device (cfq_may_dispatch,
// cfq_dispatch_request, cfq_dispatch_insert, cfq_activate_request).
#include <algorithm>
#include <limits>

#include "sched/cfq/cfq_scheduler.hpp"
#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {

[[gnu::hot]] ElevatorParams CfqScheduler::elevator() const {
    return ElevatorParams{std::uint64_t(t_.back_seek_max) * 2, t_.back_seek_penalty};
}

[[gnu::hot]] bool CfqScheduler::may_dispatch(const CfqQueue& q, Time now) const {
    if (q.must_dispatch) return true;   // an expired FIFO head goes out now
    // Drain async requests before starting sync I/O we want to idle for.
    if (should_idle(q) && rq_in_flight_[0]) return false;
    // An async queue waits while sync I/O is in flight.
    if (rq_in_flight_[1] && !q.sync) return false;
    if (contended_seeky(q)) return q.dispatched < long(t_.contended_seeky_depth);

    long max_dispatch = std::max<long>(t_.quantum / 2, 1);
    if (q.dispatched >= max_dispatch) {
        // The only busy sync queue has no limit: it could preempt async anyway.
        const bool promote_sync = q.sync && busy_sync_queues_ == 1;
        // Other queues wait: stop when this slice will be used up soon.
        const bool used_soon = q.slice_new || now + t_.slice_idle * q.dispatched > q.slice_end;
        if (busy_queues_ > 1 && used_soon && !promote_sync) return false;
        if (busy_queues_ == 1 || promote_sync) max_dispatch = std::numeric_limits<long>::max();
        else max_dispatch = t_.quantum;   // deeper at the start of the slice
    }
    // low_latency: async depth ramps up with the time since sync I/O was last
    // delayed (one more request per slice_sync).
    if (!q.sync && t_.low_latency) {
        long depth = long((now - last_delayed_sync_) / t_.slice_sync);
        if (!depth && !q.dispatched) depth = 1;
        max_dispatch = std::min(max_dispatch, depth);
    }
    return q.dispatched < max_dispatch;
}

[[gnu::hot]] std::optional<Request> CfqScheduler::dispatch_request(CfqQueue& q, Time now) {
    if (q.empty()) return std::nullopt;
    auto expired = q.check_fifo(now);
    if (expired) q.must_dispatch = true;
    if (!may_dispatch(q, now)) return std::nullopt;

    Request req = q.remove_for_dispatch(expired ? *expired : *q.next_rq, elevator());
    --rq_queued_;
    ++q.dispatched;
    ++q.group->dispatched;
    ++rq_in_flight_[q.sync ? 1 : 0];
    // cfq_activate_request: the device now holds it; the head moves to its end.
    ++rq_in_driver_;
    last_position_ = req.offset / 512 + req.sectors();
    EntityStats* client = queue_stats(q, req);
    if (auto slot = in_flight_slot(req.id); slot == in_flight_.end() || slot->id != req.id)
        in_flight_.insert(slot, InFlight{req.id, &q, req, q.client ? client : nullptr});

    for (EntityStats* s : {&device_stats_, static_cast<EntityStats*>(&q.group->stats), client}) {
        if (!s) continue;
        ++s->dispatched;
        s->dispatched_sectors += req.sectors();
    }
    return req;
}

}   // namespace nbdsched::sched::cfq
