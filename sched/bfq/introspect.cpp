// BfqScheduler: statistics and run-time tunables.
#include "sched/bfq/scheduler.hpp"

namespace nbdsched::sched::bfq {

SchedulerStats BfqScheduler::stats(Time now) const {
    SchedulerStats s;
    s.device = device_stats_;
    for (const auto& [id, g] : groups_) s.groups[id] = g.stats;
    for (const auto& [id, c] : clients_) {
        QueueStats& qs = s.queues[id];
        static_cast<EntityStats&>(qs) = c.stats;
        if (auto q = queues_.find(queue_key(id, true)); q != queues_.end()) qs.io_bound = q->second.io_bound;
    }
    s.hw_tag = hw_tag_.value() == 1;
    s.idling = idle_until_.has_value();
    if (idle_until_ && in_service_) {
        // Count the idle period in progress too.
        Nanos running = std::min(now, *idle_until_) - idle_start_;
        if (running > Nanos{}) {
            s.device.idle_time += running;
            s.groups[in_service_->group()].idle_time += running;
            s.queues[in_service_->client()].idle_time += running;
        }
    }
    return s;
}

std::optional<std::uint64_t> BfqScheduler::queue_max_budget(QueueId client, bool sync) const {
    auto it = queues_.find(queue_key(client, sync));
    if (it == queues_.end()) return std::nullopt;
    return it->second.max_budget;
}

std::vector<std::string> BfqScheduler::tunable_names() const { return table().names(); }

std::optional<std::string> BfqScheduler::get_tunable(std::string_view name) const {
    return table().get(tunables_, name);
}

std::string BfqScheduler::set_tunable(std::string_view name, std::string_view value, Time now) {
    leave_lone();
    process_timer(now);
    std::string err = table().set(tunables_, device_, name, value);
    if (!err.empty()) return err;
    if (name == "max_budget" || name == "timeout_sync") {
        // An explicit max_budget applies at once; auto goes back to the
        // peak-rate estimate (the kernel's bfq_max_budget_store).
        if (tunables_.max_budget || peak_rate_known_) refresh_max_budget();
        else computed_max_budget_ = 16 * 1024;
    }
    // Queued requests stay where they are; only an idle period that the
    // new settings no longer justify is cut short.
    if (in_service_ && in_service_->wait_request && !better_to_idle(*in_service_)) {
        BfqQueue& q = *in_service_;
        stop_idling(q, now);
        if (q.empty()) expire(q, false, Expiry::no_more_requests, now);
    }
    return {};
}

}   // namespace nbdsched::sched::bfq

namespace nbdsched::sched {

std::unique_ptr<Scheduler> make_bfq(const DeviceTraits& device, const Tunables& tunables,
                                    std::string& error) {
    auto t = bfq::table().build(device, tunables, error);
    return t ? std::make_unique<bfq::BfqScheduler>(device, *t) : nullptr;
}

std::vector<std::string> bfq_tunable_names() { return bfq::table().names(); }

}   // namespace nbdsched::sched
