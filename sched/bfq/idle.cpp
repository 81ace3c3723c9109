// When to plug dispatch for the in-service queue and for how long:
// bfq_better_to_idle() and its two halves, bfq_asymmetric_scenario(),
// bfq_arm_slice_timer(), plus nbdsched's group_idle extension.
#include "sched/bfq/scheduler.hpp"
#include "sched/bfq/constants.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {

[[gnu::hot]] Nanos BfqScheduler::guarantee_idle() const {
    // slice_idle serves both purposes when set; with slice_idle 0 (the seed
    // 002 default on flash) group_idle keeps the service guarantees.
    return tunables_.slice_idle.count() ? tunables_.slice_idle : tunables_.group_idle;
}

[[gnu::hot]] bool BfqScheduler::several_groups_pending() const {
    // A group competes while it has requests queued or in flight; while it
    // is in service (the in-service queue stays "busy" until it is expired,
    // as in the kernel, and that is exactly when the idling decision is
    // taken); while it is still scheduled (a preempted queue waiting for its
    // next request stays busy, see expire()); and while B-WF2Q+ remembers it
    // on its idle tree (it went idle with its finish ahead of the virtual
    // time, so its weight still counts): a client at iodepth 1 has nothing
    // pending during each of its think times, and not idling then hands the
    // device to the other group; and, on flash, for a while after its queue
    // was preempted (preempted_until, see expire()). Asked several times
    // per request, so it stops at the second, and does not look with one
    // group.
    if (groups_.size() < 2) return false;
    bool one = false;
    for (const auto& [id, g] : groups_) {
        if (!(g.pending > 0 || g.entity.in_service || g.entity.where != Entity::Where::none || g.preempted_until > now_))
            continue;
        if (one) return true;
        one = true;
    }
    return false;
}

[[gnu::hot]] bool BfqScheduler::asymmetric_scenario() const {
    // bfq_asymmetric_scenario() since Yu Kuai's 2022 fix ("> 0 is always
    // true"): more than one group with pending requests, the root group
    // counted like any other. nbdsched has no root group holding plain
    // queues: every client is in a group (group 0 is an ordinary one), so a
    // lone group here is the kernel's lone active group, root or not, and
    // the equivalent count is "> 1" over all groups. Queue weights and
    // ioprio classes cannot differ in nbdsched, so the other terms of the
    // kernel test are always false.
    return several_groups_pending();
}

bool BfqScheduler::seeky_and_contended(const BfqQueue& q, Time now) const {
    // nbdsched extension (contended_seeky_depth): a seeky queue's next
    // request seeks anyway, so turns of one request cost it no locality it
    // had, and a qd1 reader in another group then waits behind one request,
    // not behind a whole budget (up to timeout_sync) and a device queue.
    if (!q.sync() || !q.seeky_so_far()) return false;
    if (asymmetric_scenario()) return true;
    // A group whose client thought longer than the idle window is not
    // pending, but it comes back soon: stay contended for the window in
    // which BFQ counts an arrival as in time, so that its next request does
    // not find the device filled by one queue's whole budget.
    for (const auto& [id, g] : groups_)
        if (id != q.group() && g.recent_until > now) return true;
    return false;
}

bool BfqScheduler::idling_boosts_thr_without_issues(const BfqQueue& q) const {
    if (q.closed) return false;
    const bool rotational = device_.rotational;
    const bool queueing = hw_tag_.queueing();
    // A disk that does not queue always gains from waiting for the next
    // nearby request; otherwise only a sequential, I/O-bound queue with a
    // short think time does, and never on flash that queues commands.
    bool rot_without_queueing = rotational && !queueing;
    bool seq_io_bound = !q.seeky() && q.io_bound && q.has_short_ttime();
    return rot_without_queueing || ((rotational || !queueing) && seq_io_bound);
}

[[gnu::hot]] bool BfqScheduler::idling_needed_for_service_guarantees(const BfqQueue&) const {
    // No weight raising in nbdsched, so only the asymmetry term remains.
    return asymmetric_scenario();
}

[[gnu::hot]] bool BfqScheduler::better_to_idle(const BfqQueue& q) const {
    if (q.closed) return false;   // no process references
    if (tunables_.strict_guarantees) return true;
    if (!q.sync()) return false;
    if (tunables_.slice_idle.count() != 0)
        return idling_boosts_thr_without_issues(q) || idling_needed_for_service_guarantees(q);
    // nbdsched extension: slice_idle 0 drops idling for throughput; idling
    // for guarantees stays, for group_idle.
    return tunables_.group_idle.count() != 0 && idling_needed_for_service_guarantees(q);
}

void BfqScheduler::arm_idle_timer(BfqQueue& q, Time now) {
    Nanos sl = guarantee_idle();
    // A seeky queue gets just enough time to issue its next request, unless
    // idling protects someone's share (asymmetric scenario).
    if (q.seeky() && !asymmetric_scenario()) sl = std::min(sl, kMinTt);
    q.wait_request = true;
    last_idling_start_ = now;
    idle_start_ = now;
    idle_until_ = now + sl;
}

void BfqScheduler::stop_idling(BfqQueue& q, Time now) {
    q.wait_request = false;
    if (!idle_until_) return;
    Nanos idled = std::max(Nanos{}, std::min(now, *idle_until_) - idle_start_);
    group_of(q).stats.idle_time += idled;
    q.client_stats->idle_time += idled;
    device_stats_.idle_time += idled;
    idle_until_.reset();
}

}   // namespace nbdsched::sched::bfq
