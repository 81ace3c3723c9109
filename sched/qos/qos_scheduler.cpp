// The request path of the QoS layer: gate, floor, policy. Settings and
// statistics are in qos_settings.cpp.
#include "sched/qos/qos_scheduler.hpp"

#include <algorithm>
#include <climits>

namespace nbdsched::sched::qos {

namespace {

// What a request costs a byte rate (the limit's and the floor's buckets, the
// protector's served bytes): the data it moves. A TRIM or a WRITE_ZEROES
// names a range but carries no payload, and the backends drop or zero it in
// place (fallocate, the RAM pages, rbd_discard/rbd_write_zeroes). Charged
// the whole range, one 32 MiB trim under a 1 MiB/s limit held the group's
// next read for 32 s. Both cost one sector, as blk-throttle's
// throtl_bio_data_size() charges a REQ_OP_DISCARD ("assume it's one
// sector", block/blk-throttle.c); the kernel charges a WRITE_ZEROES in full,
// but none of its bytes cross the wire here either. Each still counts as
// one request against an iops rate.
constexpr std::uint64_t k_no_data_cost = 512;

std::uint64_t data_bytes(const Request& r) {
    const bool no_data = r.op == Op::trim || r.op == Op::write_zeroes;
    return no_data ? std::min(r.length, k_no_data_cost) : r.length;
}

}   // namespace

QosScheduler::QosScheduler(std::unique_ptr<Scheduler> inner, const DeviceTraits& device)
    : inner_(std::move(inner)), device_(device) {
    if (device_.max_depth == 0) device_.max_depth = 1;
}

void QosScheduler::open_queue(QueueId queue, GroupId group, Time now) {
    closed_held_.erase(queue);
    inner_->open_queue(queue, group, now);
}

// The policy learns of the close at once (cfq and bfq stop idling for the
// client); what this layer still holds of the client goes to the policy later
// through to_policy(), which closes the queue again behind each request.
void QosScheduler::close_queue(QueueId queue, Time now) {
    inner_->close_queue(queue, now);
    if (held_ == 0) return;
    unsigned held = 0;
    for (const auto& [id, g] : groups_)
        for (const auto* q : {&g.gated, &g.ready})
            held += unsigned(std::count_if(q->begin(), q->end(), [&](const Request& r) { return r.queue == queue; }));
    if (held > 0) closed_held_[queue] = held;
}

// Whether `queue` was closed while this layer held the request leaving it now.
bool QosScheduler::release_closed(QueueId queue) {
    if (closed_held_.empty()) return false;
    auto it = closed_held_.find(queue);
    if (it == closed_held_.end()) return false;
    if (--it->second == 0) closed_held_.erase(it);
    return true;
}

// A request past the gate goes to the policy. If its client has closed, the
// policy may have freed the client's queue, and a submit would make a new,
// open one (cfq never freed it, and idled for the dead client): closed again.
void QosScheduler::to_policy(Group& g, const Request& r, Time now) {
    ++g.in_policy;
    inner_->submit(r, now);
    if (release_closed(r.queue)) inner_->close_queue(r.queue, now);
}

// Time-based counters and the protectors' windows, for (last_, now].
void QosScheduler::advance(Time now) {
    if (now <= last_) return;
    for (auto& [id, g] : groups_) {
        const bool active = g.outstanding + g.gated.size() > 0;
        if (g.limit_blocked) g.stats.throttled_time += now - last_;
        if (g.reserved() && active) {
            Nanos below = std::max(g.reserve_iops.full_time_until(now), g.reserve_bps.full_time_until(now));
            g.stats.below_reservation += below;
        }
        if (active) g.protector.add_active(now - last_);
        for (Bucket* b : {&g.limit_iops, &g.limit_bps, &g.reserve_iops, &g.reserve_bps}) b->refill(now);
        g.protector.roll(now, g.stats);
    }
    last_ = now;
}

// An unprotected group keeps at most what the strictest protector allows
// outstanding; a protected one is never capped by another. While a latency
// protector that has missed its target has a request waiting in the policy,
// unprotected groups send nothing more (the hold): a policy with time slices
// (cfq) would otherwise make it wait out another group's slice, which no
// depth shortens, whenever its next request came after the policy stopped
// idling. The hold is bounded two ways. It applies only while the protector
// has no more requests outstanding than the device takes: one that queues
// more waits for itself, and holding the others back cannot help it.
// And no request waits for a hold longer than the protector's window: then
// its group keeps the depth cap (at least one), as io.latency never throttles
// a group below one request.
bool QosScheduler::holds(const Group& p) const {
    return p.qos.latency_target.count() > 0 && p.protector.pressed() && p.in_policy > 0 &&
           p.outstanding <= device_.max_depth;
}

// When the hold on `g`'s oldest request at the gate ends; nullopt if none holds it.
[[gnu::hot]] std::optional<Time> QosScheduler::held_until(const Group& g) const {
    if (g.protects() || g.gated.empty()) return std::nullopt;
    auto t = tracks_.find(g.gated.front().id);
    if (t == tracks_.end()) return std::nullopt;
    std::optional<Time> until;
    for (const auto& [id, p] : groups_) {
        if (!p.protects() || !holds(p)) continue;
        const Time end = t->second.arrival + p.protector.window();
        if (!until || end > *until) until = end;
    }
    return until;
}

unsigned QosScheduler::depth_cap(const Group& g, Time now) const {
    if (g.protects()) return UINT_MAX;
    if (auto until = held_until(g); until && now < *until) return 0;
    unsigned cap = UINT_MAX;
    for (const auto& [id, p] : groups_)
        if (p.protects()) cap = std::min(cap, p.protector.depth());
    return cap;
}

bool QosScheduler::limit_ready(const Group& g, const Request& r) const {
    return g.limit_iops.ready(1) && g.limit_bps.ready(double(data_bytes(r)));
}

bool QosScheduler::below_floor(const Group& g, const Request& r) const {
    return (g.reserve_iops.on() && g.reserve_iops.ready(1)) ||
           (g.reserve_bps.on() && g.reserve_bps.ready(double(data_bytes(r))));
}

// Every dispatch of a reserved group counts toward its floor, whichever
// phase made it: the reservation is a floor under the weight share, not an
// addition to it.
void QosScheduler::charge_floor(Group& g, const Request& r) {
    g.reserve_iops.take(1);
    g.reserve_bps.take(double(data_bytes(r)));
    g.protector.add_served(data_bytes(r));
}

void QosScheduler::pass_gate(Group& g, Time now) {
    g.limit_blocked = false;
    if (g.gated.empty()) return;
    const unsigned cap = depth_cap(g, now);
    while (!g.gated.empty()) {
        const Request& r = g.gated.front();
        if (!limit_ready(g, r)) {
            g.limit_blocked = true;
            return;
        }
        if (g.outstanding >= cap) return;
        g.limit_iops.take(1);
        g.limit_bps.take(double(data_bytes(r)));
        ++g.outstanding;
        if (g.reserved()) {
            g.ready.push_back(r);
        } else {
            --held_;
            to_policy(g, r, now);
        }
        g.gated.pop_front();
    }
}

[[gnu::hot]] void QosScheduler::submit(const Request& request, Time now) {
    if (!active_) {
        inner_->submit(request, now);
        return;
    }
    advance(now);
    Group& g = group(request.group);
    tracks_[request.id] = Track{request.group, request.queue, now, request.sectors(), false};
    if (g.qos.limit.set() && (!g.gated.empty() || !limit_ready(g, request))) ++g.stats.limit_delayed;
    g.gated.push_back(request);
    ++held_;
    pass_gate(g, now);
}

// The constraint phase: of the groups below their floor, the one owed the
// most (its credit nearest its cap first, then the lowest id).
std::optional<Request> QosScheduler::dispatch_floor(Time now) {
    Group* best = nullptr;
    double best_credit = 0;
    for (auto& [id, g] : groups_) {
        if (g.ready.empty() || !below_floor(g, g.ready.front())) continue;
        double credit = std::max(g.reserve_iops.tokens(), g.reserve_bps.on() ? 1.0 : 0.0);
        if (!best || credit > best_credit) best = &g, best_credit = credit;
    }
    if (!best) return std::nullopt;
    Request r = best->ready.front();
    best->ready.pop_front();
    --held_;
    release_closed(r.queue);
    charge_floor(*best, r);
    ++best->stats.reserved_dispatches;
    ++direct_in_flight_;
    tracks_[r.id].direct = true;
    for (EntityStats* s : {&best->direct, &direct_queues_[r.queue]}) {
        ++s->dispatched;
        s->dispatched_sectors += r.sectors();
    }
    (void)now;
    return r;
}

[[gnu::hot]] std::optional<Request> QosScheduler::dispatch(Time now) {
    if (!active_ && tracks_.empty()) return inner_->dispatch(now);
    advance(now);
    for (auto& [id, g] : groups_) pass_gate(g, now);
    if (in_flight() >= device_.max_depth) return std::nullopt;
    if (auto r = dispatch_floor(now)) return r;
    // The weight phase: a reserved group above its floor competes in the
    // policy like any other, one request at a time, so that the rest stay
    // here for the floor should it fall behind.
    for (auto& [id, g] : groups_) {
        if (g.ready.empty() || g.in_policy > 0) continue;
        --held_;
        to_policy(g, g.ready.front(), now);
        g.ready.pop_front();
    }
    auto r = inner_->dispatch(now);
    if (!r) return r;
    if (auto t = tracks_.find(r->id); t != tracks_.end()) {
        Group& g = group(t->second.group);
        if (g.in_policy > 0) --g.in_policy;
        if (g.reserved()) charge_floor(g, *r);
    }
    return r;
}

[[gnu::hot]] void QosScheduler::complete(RequestId id, Time now) {
    if (tracks_.empty()) return inner_->complete(id, now);   // nothing of ours in flight: no lookup
    auto t = tracks_.find(id);
    if (t == tracks_.end()) {
        inner_->complete(id, now);
        return;
    }
    advance(now);
    const Track track = t->second;
    tracks_.erase(t);
    Group& g = group(track.group);
    if (g.outstanding > 0) --g.outstanding;
    g.protector.add_latency(now - track.arrival);
    if (!track.direct) {
        inner_->complete(id, now);
        return;
    }
    --direct_in_flight_;
    ++g.direct.completed;
    ++direct_queues_[track.queue].completed;
}

[[gnu::hot]] std::optional<Time> QosScheduler::next_wakeup() const {
    const bool room = in_flight() < device_.max_depth;
    // With the device full, dispatch() returns before it asks the policy,
    // so a policy's timer (cfq's, bfq's idle timer: they fire inside their
    // own calls) could not fire; its wake-up would stay in the past and the
    // device loop would spin until a completion. The next completion reaches
    // the policy or makes room, and then dispatch() asks it: left out until then.
    const bool policy_asked = room || (!active_ && tracks_.empty());
    auto wake = policy_asked ? inner_->next_wakeup() : std::nullopt;
    auto earliest = [&](std::optional<Time> t) {
        if (t && (!wake || *t < *wake)) wake = t;
    };
    for (const auto& [id, g] : groups_) {
        if (!g.limit_blocked) {
            if (auto until = held_until(g); until && *until > last_) earliest(until);
        }
        if (g.limit_blocked && !g.gated.empty()) {
            auto a = g.limit_iops.ready_at(1), b = g.limit_bps.ready_at(double(data_bytes(g.gated.front())));
            earliest(a && b ? std::max(a, b) : a ? a
                                                 : b);
        }
        if (room && !g.ready.empty() && !below_floor(g, g.ready.front())) {
            auto a = g.reserve_iops.on() ? g.reserve_iops.ready_at(1) : std::nullopt;
            auto b = g.reserve_bps.on() ? g.reserve_bps.ready_at(double(data_bytes(g.ready.front()))) : std::nullopt;
            earliest(a && b ? std::min(a, b) : a ? a
                                                 : b);
        }
    }
    return wake;
}

}   // namespace nbdsched::sched::qos
