#include "sched/none.hpp"

#include <algorithm>
#include <charconv>

namespace nbdsched::sched {

NoneScheduler::NoneScheduler(const DeviceTraits& device)
    : device_(device), max_depth_(device.max_depth == 0 ? 1 : device.max_depth) {}

void NoneScheduler::set_group(GroupId group, unsigned weight) {
    group_stats(group).weight = weight;
}

void NoneScheduler::open_queue(QueueId queue, GroupId group, Time) {
    queue_stats(queue);
    group_stats(group);
}

void NoneScheduler::close_queue(QueueId, Time) {
    // Nothing to free: a closed queue's requests are still in fifo_/in_flight_.
}

EntityStats& NoneScheduler::queue_stats(QueueId queue) { return queue_stats_[queue]; }

GroupStats& NoneScheduler::group_stats(GroupId group) {
    auto [it, inserted] = group_stats_.try_emplace(group);
    if (inserted) it->second.weight = 100;
    return it->second;
}

void NoneScheduler::submit(const Request& request, Time) {
    fifo_.push_back(request);
    ++device_stats_.queued;
    ++queue_stats(request.queue).queued;
    ++group_stats(request.group).queued;
}

std::optional<Request> NoneScheduler::dispatch(Time) {
    if (fifo_.empty() || in_flight_.size() >= max_depth_) return std::nullopt;
    Request request = fifo_.front();
    fifo_.pop_front();
    in_flight_.emplace(request.id, request);
    for (EntityStats* s : {&device_stats_, &queue_stats(request.queue),
                           static_cast<EntityStats*>(&group_stats(request.group))}) {
        --s->queued;
        ++s->in_flight;
        ++s->dispatched;
        s->dispatched_sectors += request.sectors();
    }
    return request;
}

void NoneScheduler::complete(RequestId id, Time) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;   // unknown id: ignore rather than corrupt counters
    const Request& request = it->second;
    for (EntityStats* s : {&device_stats_, &queue_stats(request.queue),
                           static_cast<EntityStats*>(&group_stats(request.group))}) {
        --s->in_flight;
        ++s->completed;
    }
    in_flight_.erase(it);
}

std::vector<std::string> NoneScheduler::tunable_names() const { return none_tunable_names(); }

std::optional<std::string> NoneScheduler::get_tunable(std::string_view name) const {
    if (name == "max_depth") return std::to_string(max_depth_);
    return std::nullopt;
}

std::string NoneScheduler::set_tunable(std::string_view name, std::string_view value, Time) {
    if (name != "max_depth") return "none: unknown tunable '" + std::string(name) + "'";
    unsigned depth = 0;
    if (value == "auto") {
        depth = device_.max_depth;
    } else {
        auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), depth);
        if (ec != std::errc() || ptr != value.data() + value.size() || depth == 0)
            return "none: max_depth must be a positive integer or 'auto', got '" +
                   std::string(value) + "'";
    }
    // The device cannot take more than it advertises; clamp instead of failing
    // so a config written for a deeper device still loads.
    max_depth_ = std::min(depth, device_.max_depth == 0 ? 1u : device_.max_depth);
    return {};
}

SchedulerStats NoneScheduler::stats(Time) const {
    SchedulerStats out;
    out.device = device_stats_;
    out.queues.insert(queue_stats_.begin(), queue_stats_.end());
    out.groups.insert(group_stats_.begin(), group_stats_.end());
    out.hw_tag = device_.max_depth > 1;   // none does not detect; it trusts the device
    return out;
}

std::unique_ptr<Scheduler> make_none(const DeviceTraits& device, const Tunables& tunables,
                                     std::string& error) {
    auto scheduler = std::make_unique<NoneScheduler>(device);
    for (const auto& [name, value] : tunables) {
        error = scheduler->set_tunable(name, value, Time{});
        if (!error.empty()) return nullptr;
    }
    return scheduler;
}

std::vector<std::string> none_tunable_names() { return {"max_depth"}; }

} // namespace nbdsched::sched
