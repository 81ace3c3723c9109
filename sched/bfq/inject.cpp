// Injection: while the device is plugged for the in-service queue (it is
// empty and BFQ waits for its next request, or waits for its requests in
// flight before idling), other queues' requests are dispatched as long as
// that does not slow the in-service queue down (Linux 5.2+ / 6.x:
// bfq_choose_bfqq_for_injection, bfq_update_inject_limit, the sampling in
// bfq_add_request). Always on, as in the kernel, which has no switch.
//
// One departure, so that weights between groups hold: a queue is injected
// only if its group and the queue itself are eligible in B-WF2Q+ (virtual
// start <= virtual time), and its timestamps advance by the service it got
// (ServiceTree::served). Injection then moves a light group's service into
// the heavy group's think time instead of adding to it. The kernel takes any
// busy queue with budget left, which lets an injected group exceed its share.
#include "sched/bfq/scheduler.hpp"
#include "sched/bfq/constants.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {
namespace {
using namespace std::chrono_literals;
constexpr Nanos kLimitResetPeriod = 1000ms;   // bfq_add_request: reset every second
constexpr Nanos kSamplePeriod = 10ms;         // at most one sample per 10 ms
}   // namespace

std::optional<unsigned> BfqScheduler::inject_limit(QueueId client) const {
    auto it = queues_.find(queue_key(client, true));
    if (it == queues_.end()) return std::nullopt;
    return it->second.inject_limit;
}

BfqQueue* BfqScheduler::injection_source(const BfqQueue& in_service, Time now) {
    // Idling for throughput wants the device to itself (no weight raising
    // here, so the kernel's other terms are always true). nbdsched injects on
    // non-rotational devices only (see docs/schedulers-bfq.md).
    if (device_.rotational || idling_boosts_thr_without_issues(in_service)) return nullptr;
    // The same client's async I/O first, without limit: it cannot hurt the
    // client (its group is the one in service).
    if (in_service.sync()) {
        auto it = queues_.find(queue_key(in_service.client(), false));
        if (it != queues_.end()) {
            BfqQueue& a = it->second;
            if (a.entity.busy() && !a.empty() && charge(*next_rq(a, now), a) <= a.entity.budget) return &a;
        }
    }
    return choose_queue_for_injection(now);
}

BfqQueue* BfqScheduler::choose_queue_for_injection(Time now) {
    BfqQueue& cur = *in_service_;
    unsigned limit = cur.inject_limit;
    // No baseline yet and plugged for a whole idle period: the device is
    // being wasted, so allow one request.
    if (limit == 0 && cur.last_serv_time == Nanos{} && cur.wait_request &&
        now >= last_idling_start_ + guarantee_idle())
        limit = 1;
    if (in_flight_.size() >= limit) return nullptr;
    // On flash a large request may go in only when the device is empty: the
    // drive favours large requests and would make the in-service queue's
    // next request wait.
    const bool large_ok = in_flight_.empty();
    // The in-service group's other queues first: serving them cannot cost
    // another group anything. Then the groups B-WF2Q+ would serve next.
    BfqQueue* q = injectable_in(group_of(cur), large_ok, now);
    if (!q) {
        for (Entity* ge : root_.eligible()) {
            q = injectable_in(groups_.at(GroupId(ge->key)), large_ok, now);
            if (q) break;
        }
    }
    if (q) inject_.rqs_injected = true;
    return q;
}

BfqQueue* BfqScheduler::injectable_in(BfqGroup& g, bool large_ok, Time now) {
    for (Entity* e : g.tree.eligible()) {
        BfqQueue& q = queues_.at(e->key);
        const Request* next = next_rq(q, now);
        if (!next) continue;
        if (charge(*next, q) > q.entity.budget) continue;
        if (!large_ok && next->sectors() >= kSectThrNonrot) continue;
        return &q;
    }
    return nullptr;
}

void BfqScheduler::retire_drained(BfqQueue& q) {
    // bfq_del_bfqq_busy for a waiting queue emptied by injection. Its start
    // already carries the service it got, so it leaves with finish = start
    // (the kernel keeps finish = start + budget on its idle tree, which
    // would charge one injected request as a whole budget).
    if (!q.empty() || q.entity.in_service) return;
    BfqGroup& g = group_of(q);
    q.entity.finish = q.entity.start;
    g.tree.deactivate(q.entity);
    if (g.tree.empty() && !g.entity.in_service) {
        g.entity.finish = g.entity.start;
        root_.deactivate(g.entity);
    }
}

[[gnu::hot]] void BfqScheduler::inject_on_arrival(BfqQueue& q, bool in_service, Time now) {
    // bfq_add_request: only a sync queue with this one request pending.
    if (!q.sync() || q.size() + q.dispatched > 1) return;
    if (now >= q.decrease_time + kLimitResetPeriod) reset_inject_limit(q, now);
    // Sample the total service time of this request if the device is empty
    // (baseline), or if injected requests are in flight (effect of the
    // limit); not more often than every 10 ms.
    if (!in_service || now < q.decrease_time + kSamplePeriod) return;
    const bool empty = in_flight_.empty();
    if (!(empty || (q.last_serv_time > Nanos{} && inject_.rqs_injected))) return;
    inject_.last_empty_occupied = now;
    inject_.wait_dispatch = true;
    // Injection before this request arrived does not delay it.
    if (empty) inject_.rqs_injected = false;
}

[[gnu::hot]] void BfqScheduler::inject_on_dispatch(const BfqQueue& q, RequestId id) {
    if (in_service_ == &q && inject_.wait_dispatch) {
        inject_.wait_dispatch = false;
        inject_.waited_rq = id;
    }
}

[[gnu::hot]] void BfqScheduler::inject_on_completion(BfqQueue& q, RequestId id, Time now) {
    // Before the request leaves in_flight_: the kernel's tot_rq_in_driver.
    inject_.max_in_driver = std::max(inject_.max_in_driver, unsigned(in_flight_.size()));
    if (inject_.waited_rq == id) update_inject_limit(q, now);
}

void BfqScheduler::update_inject_limit(BfqQueue& q, Time now) {
    // bfq_update_inject_limit: injection may go on while the in-service
    // queue's requests take less than 3/2 of their time on an empty device.
    const Nanos total = now - inject_.last_empty_occupied;
    const unsigned old = q.inject_limit;
    const bool alone = in_flight_.size() == 1;   // only this request in the device
    if (q.last_serv_time > Nanos{} && inject_.rqs_injected) {
        const Nanos threshold = q.last_serv_time * 3 / 2;
        if (total >= threshold && old > 0) {
            --q.inject_limit;
            q.decrease_time = now;
        } else if (total < threshold && old <= inject_.max_in_driver) {
            ++q.inject_limit;
        }
    }
    if ((q.last_serv_time == Nanos{} && alone) || total < q.last_serv_time) {
        if (q.last_serv_time == Nanos{}) q.inject_limit = std::max(1u, old);   // a baseline: start injecting
        q.last_serv_time = total;
    } else if (!inject_.rqs_injected && alone) {
        q.last_serv_time = total;   // a fresh baseline: it varies with the I/O pattern
    }
    inject_.waited_rq.reset();
    inject_.rqs_injected = false;
}

void BfqScheduler::reset_inject_limit(BfqQueue& q, Time now) {
    // bfq_reset_inject_limit: forget the baseline; a queue with a short
    // think time starts at 0 (an injected request might outlast its think
    // time), one with a long think time at 1.
    q.last_serv_time = Nanos{};
    inject_.waited_rq.reset();
    q.inject_limit = q.has_short_ttime() ? 0 : 1;
    q.decrease_time = now;
}

}   // namespace nbdsched::sched::bfq
