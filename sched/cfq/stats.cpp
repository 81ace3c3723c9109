// Counters and the idle slice timer's bookkeeping (time the device was held
// idle for a queue/group is charged to them in the stats).
#include "sched/cfq/cfq_scheduler.hpp"

#include <algorithm>

namespace nbdsched::sched::cfq {

void CfqScheduler::start_timer(Nanos delay, Time now) {
    cancel_timer(now);
    timer_ = now + delay;
    idle_start_ = now;
}

[[gnu::hot]] void CfqScheduler::cancel_timer(Time now) {
    if (!timer_) return;
    timer_.reset();
    const Nanos idle = std::max(now - idle_start_, Nanos{});
    device_stats_.idle_time += idle;
    if (active_) {
        active_->group->stats.idle_time += idle;
        if (active_->client) client_stats(*active_).idle_time += idle;
    }
}

// A client's entry is erased only when no sync queue of it is left
// (forget_client_stats), so the pointer a queue keeps stays valid.
EntityStats& CfqScheduler::client_stats(CfqQueue& q) {
    if (!q.client_stats) q.client_stats = &queue_stats_[*q.client];
    return *q.client_stats;
}

// A sync queue's requests are all its client's; the group's shared async
// queue holds requests of many clients, some of them perhaps closed and
// reaped: those count for their group and the device only.
[[gnu::hot]] EntityStats* CfqScheduler::queue_stats(CfqQueue& q, const Request& req) {
    if (q.client) return &client_stats(q);
    if (auto it = queue_stats_.find(req.queue); it != queue_stats_.end()) return &it->second;
    return queues_.contains(req.queue) ? &queue_stats_[req.queue] : nullptr;
}

[[gnu::hot]] EntityStats* CfqScheduler::completion_stats(const InFlight& f) {
    if (f.client_stats) return f.client_stats;
    auto it = queue_stats_.find(f.req.queue);
    return it == queue_stats_.end() ? nullptr : &it->second;
}

void CfqScheduler::forget_client_stats(QueueId client) {
    if (queues_.contains(client)) return;
    for (const auto& q : retired_)
        if (q->client == client) return;
    queue_stats_.erase(client);
}

SchedulerStats CfqScheduler::stats(Time now) const {
    SchedulerStats s;
    s.device = device_stats_;
    s.hw_tag = hw_tag();
    s.idling = timer_.has_value();
    const Nanos ongoing = timer_ ? std::max(now - idle_start_, Nanos{}) : Nanos{};
    if (timer_) s.device.idle_time += ongoing;
    s.device.queued = std::uint64_t(rq_queued_);
    s.device.in_flight = std::uint64_t(rq_in_driver_);

    for (const auto& [id, g] : groups_) {
        GroupStats gs = g->stats;
        gs.weight = g->new_weight ? g->new_weight : g->weight;
        gs.queued = gs.in_flight = 0;
        s.groups[id] = gs;
    }
    for (const auto& [id, qs] : queue_stats_) {
        QueueStats& e = s.queues[id];
        static_cast<EntityStats&>(e) = qs;
        e.queued = e.in_flight = 0;
        if (auto q = queues_.find(id); q != queues_.end()) e.idle_window = q->second->idle_window;
    }
    if (timer_ && active_) {
        s.groups[active_->group->id].idle_time += ongoing;
        if (active_->client) s.queues[*active_->client].idle_time += ongoing;
    }
    // Live counts per client and group, from the queues themselves (async
    // requests sit in their group's shared queue but count for their client).
    auto count_queue = [&s](const CfqQueue& q) {
        for (const CfqQueue::Entry& e : q.sorted) {
            const CfqQueue::Pending& p = q.at(e);
            ++s.queues[p.req.queue].queued;
            ++s.groups[q.group->id].queued;
        }
    };
    for (const auto& [id, q] : queues_) count_queue(*q);
    for (const auto& q : retired_) count_queue(*q);
    for (const auto& [id, g] : groups_)
        if (g->async_queue) count_queue(*g->async_queue);
    for (const InFlight& f : in_flight_) {
        ++s.queues[f.req.queue].in_flight;
        ++s.groups[f.queue->group->id].in_flight;
    }
    return s;
}

}   // namespace nbdsched::sched::cfq
