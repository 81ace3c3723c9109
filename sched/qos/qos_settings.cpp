// The QoS layer's settings, statistics and the factory helpers.
#include <algorithm>
#include <limits>

#include "sched/qos/qos_scheduler.hpp"

namespace nbdsched::sched::qos {

namespace {

double seconds(Nanos d) { return std::chrono::duration<double>(d).count(); }

// How much credit a floor may bank and how far ahead of it a group may get:
// two requests, or 10 ms of bytes (a floor is a rate, not a saved-up burst).
// One request was too little where dispatch chances come late (a loaded
// host's timers, or cfq serving seeky queues one request at a time): the
// credit past the cap is lost each time, and the floor ends below its rate.
constexpr double k_floor_bytes_window = 0.010;
constexpr double k_floor_requests = 2;

}   // namespace

std::string QosScheduler::set_qos(GroupId id, const GroupQos& q, Time now) {
    if (auto why = check(q); !why.empty()) return why;
    advance(now);
    Group& g = group(id);
    const bool was_reserved = g.reserved();
    g.qos = q;
    const double burst = seconds(q.burst);
    const double iops = double(q.limit.iops), bps = double(q.limit.bps);
    g.limit_iops.configure(iops, std::max(1.0, iops * burst), 0, now);
    // Bytes may run into debt: a request larger than the bucket waits for a
    // full one, then the next waits for the debt to be paid (exact rate).
    g.limit_bps.configure(bps, std::max(4096.0, bps * burst), -std::numeric_limits<double>::max(), now);
    const double r_bps = double(q.reserve.bps), r_cap = std::max(4096.0, r_bps * k_floor_bytes_window);
    g.reserve_iops.configure(double(q.reserve.iops), k_floor_requests, -1, now);
    // A request larger than the floor's depth still takes its whole length
    // (Bucket::take keeps a debt of one request): charged 2 * r_cap, a 1 MiB
    // request at 1 MiB/s was due again 20 ms later, a floor of 50 MiB/s.
    g.reserve_bps.configure(r_bps, r_cap, -r_cap, now);
    g.protector.configure(q.latency_target, double(q.reserve.iops), r_bps, device_.max_depth, now);
    g.stats.depth_cap = g.protects() ? g.protector.depth() : 0;
    if (was_reserved && !g.reserved()) {
        // Past its gate already: hand them to the policy.
        for (const Request& r : g.ready) to_policy(g, r, now);
        held_ -= g.ready.size();
        g.ready.clear();
    }
    active_ = std::any_of(groups_.begin(), groups_.end(), [](const auto& e) { return e.second.qos.any(); });
    if (!active_) flush_all(now);
    return {};
}

// No group has a setting left: whatever waits here goes to the policy now.
void QosScheduler::flush_all(Time now) {
    for (auto& [id, g] : groups_) {
        g.outstanding += unsigned(g.gated.size());   // the ready ones are counted already
        for (auto* q : {&g.ready, &g.gated}) {
            for (const Request& r : *q) to_policy(g, r, now);
            held_ -= q->size();
            q->clear();
        }
        g.limit_blocked = false;
    }
}

GroupQos QosScheduler::qos(GroupId id) const {
    auto it = groups_.find(id);
    return it == groups_.end() ? GroupQos{} : it->second.qos;
}

SchedulerStats QosScheduler::stats(Time now) const {
    SchedulerStats out = inner_->stats(now);
    auto add = [](EntityStats& to, const EntityStats& from, std::uint64_t queued) {
        to.dispatched += from.dispatched;
        to.completed += from.completed;
        to.dispatched_sectors += from.dispatched_sectors;
        to.in_flight += from.dispatched - from.completed;
        to.queued += queued;
    };
    for (const auto& [id, g] : groups_) {
        const std::size_t held = g.gated.size() + g.ready.size();
        add(out.groups[id], g.direct, held);
        add(out.device, g.direct, held);
        if (g.qos.any()) out.qos[id] = g.stats;
    }
    for (const auto& [queue, s] : direct_queues_) add(out.queues[queue], s, 0);
    return out;
}

QosScheduler* qos_layer(Scheduler& scheduler) { return dynamic_cast<QosScheduler*>(&scheduler); }

std::unique_ptr<QosScheduler> with_qos(std::unique_ptr<Scheduler> inner, const DeviceTraits& device) {
    return std::make_unique<QosScheduler>(std::move(inner), device);
}

}   // namespace nbdsched::sched::qos
