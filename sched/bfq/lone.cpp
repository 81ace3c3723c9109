// A lone queue between its requests (BfqScheduler::Lone): expired and
// reactivated with the kernel's results, without leaving the service trees.
// On a RAM device every request of a lone client empties its queue and
// comes back before the next arrives; the trees' work was about a fifth of
// bfq's instructions per request there.
#include "sched/bfq/scheduler.hpp"

namespace nbdsched::sched::bfq {

// expire() would take the queue and its group out of both trees, and the
// trees would then be empty; nothing is in flight or waited for.
[[gnu::hot]] bool BfqScheduler::alone_in_trees(const BfqQueue& q) const {
    return lone_shortcut_ && q.empty() && q.dispatched == 0 && !q.closed && !q.wait_request && !idle_until_ &&
           group_of(q).tree.empty() && root_.empty();
}

// A request of the kept queue itself, its client still in its group (else
// queue_for() would build it a new queue there).
[[gnu::hot]] bool BfqScheduler::resumes_lone(const Request& r) const {
    const BfqQueue& q = *in_service_;
    return q.key() == queue_key(r.queue, r.sync) && q.group() == *q.client_group;
}

// What activate_queue() does before the trees: with no queue in service,
// maybe_preempt() has nobody to preempt. Its budget depends on nothing the
// trees hold (an async request's charge asks whether other groups are
// pending, and the queue's own group counts by its pending request).
[[gnu::hot]] void BfqScheduler::resume_lone(BfqQueue& q, Time now) {
    activation_budget(q, now);
    lone_ = Lone::resumed;
    ++lone_resumes_;
}

// The first dispatch after the resume: leaving and re-entering both trees
// and being selected again, in one step per tree, then set_in_service()'s
// bookkeeping.
[[gnu::hot]] void BfqScheduler::restart_lone(Time now) {
    BfqQueue& q = *in_service_;
    BfqGroup& g = group_of(q);
    g.tree.restart_alone(q.entity, q.non_blocking_wait_rq);
    q.non_blocking_wait_rq = false;
    g.entity.budget = q.entity.budget;
    root_.restart_alone(g.entity, false);
    lone_ = Lone::none;
    begin_service(q, now);
}

// Before any other event: the trees' work that expire() and activate_queue()
// would have done.
[[gnu::hot]] void BfqScheduler::leave_lone() {
    if (lone_ == Lone::none) return;
    BfqQueue& q = *in_service_;
    BfqGroup& g = group_of(q);
    g.tree.deactivate(q.entity);
    root_.deactivate(g.entity);
    in_service_ = nullptr;
    if (lone_ == Lone::resumed) enter_trees(q);
    lone_ = Lone::none;
}

}   // namespace nbdsched::sched::bfq
