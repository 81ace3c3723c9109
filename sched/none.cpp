#include "sched/none.hpp"

namespace nbdsched::sched {
namespace {

std::uint64_t device_depth(const DeviceTraits& device) { return device.max_depth == 0 ? 1 : device.max_depth; }

// The device cannot take more than it advertises: a larger value is clamped
// instead of failing, so a config written for a deeper device still loads.
// Rows laid out by hand, one tunable per block.
// clang-format off
constexpr Tunable<NoneTunables> kRows[] = {
    {{.name = "max_depth", .unit = Unit::count, .default_value = "auto", .min = 1, .below_min_is_error = true,
      .auto_value = {device_depth, "the device's depth"}, .device_max = {device_depth, "the device's depth"},
      .why = "requests in flight at the device at once"},
     field<&NoneTunables::max_depth>},
};
// clang-format on

}   // namespace

const TunableTable<NoneTunables>& none_table() {
    static constexpr TunableTable<NoneTunables> kTable{"none", kRows};
    return kTable;
}

NoneScheduler::NoneScheduler(const DeviceTraits& device, const NoneTunables& tunables)
    : device_(device), t_(tunables) {}

void NoneScheduler::set_group(GroupId group, unsigned weight) {
    group_stats(group).weight = weight;
}

void NoneScheduler::open_queue(QueueId queue, GroupId group, Time) {
    queue_stats(queue);
    group_stats(group);
    closed_.erase(queue);
}

void NoneScheduler::close_queue(QueueId queue, Time) {
    // A closed queue's requests stay in fifo_/in_flight_; its counters go
    // when the last of them completes.
    if (!queue_stats_.contains(queue)) return;
    closed_.insert(queue);
    forget_if_drained(queue);
}

[[gnu::hot]] EntityStats& NoneScheduler::queue_stats(QueueId queue) {
    auto [it, inserted] = queue_stats_.try_emplace(queue);
    // A request of a queue that is not open (closed and forgotten, then
    // released late by a layer above): counted until it drains.
    if (inserted) closed_.insert(queue);
    return it->second;
}

[[gnu::hot]] void NoneScheduler::forget_if_drained(QueueId queue) {
    if (closed_.empty() || !closed_.contains(queue)) return;
    auto it = queue_stats_.find(queue);
    if (it != queue_stats_.end() && (it->second.queued || it->second.in_flight)) return;
    if (it != queue_stats_.end()) queue_stats_.erase(it);
    closed_.erase(queue);
}

[[gnu::hot]] GroupStats& NoneScheduler::group_stats(GroupId group) {
    auto [it, inserted] = group_stats_.try_emplace(group);
    if (inserted) it->second.weight = 100;
    return it->second;
}

[[gnu::hot]] void NoneScheduler::submit(const Request& request, Time) {
    fifo_.push_back(request);
    ++device_stats_.queued;
    ++queue_stats(request.queue).queued;
    ++group_stats(request.group).queued;
}

[[gnu::hot]] std::optional<Request> NoneScheduler::dispatch(Time) {
    if (fifo_.empty() || in_flight_.size() >= t_.max_depth) return std::nullopt;
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

[[gnu::hot]] void NoneScheduler::complete(RequestId id, Time) {
    auto it = in_flight_.find(id);
    if (it == in_flight_.end()) return;   // unknown id: ignore rather than corrupt counters
    const Request& request = it->second;
    for (EntityStats* s : {&device_stats_, &queue_stats(request.queue),
                           static_cast<EntityStats*>(&group_stats(request.group))}) {
        --s->in_flight;
        ++s->completed;
    }
    const QueueId queue = request.queue;
    in_flight_.erase(it);
    forget_if_drained(queue);
}

std::vector<std::string> NoneScheduler::tunable_names() const { return none_table().names(); }

std::optional<std::string> NoneScheduler::get_tunable(std::string_view name) const {
    return none_table().get(t_, name);
}

std::string NoneScheduler::set_tunable(std::string_view name, std::string_view value, Time) {
    return none_table().set(t_, device_, name, value);
}

SchedulerStats NoneScheduler::stats(Time) const {
    SchedulerStats out;
    out.device = device_stats_;
    for (const auto& [id, s] : queue_stats_) static_cast<EntityStats&>(out.queues[id]) = s;
    out.groups.insert(group_stats_.begin(), group_stats_.end());
    out.hw_tag = device_.max_depth > 1;   // none does not detect; it trusts the device
    return out;
}

std::unique_ptr<Scheduler> make_none(const DeviceTraits& device, const Tunables& tunables,
                                     std::string& error) {
    auto t = none_table().build(device, tunables, error);
    return t ? std::make_unique<NoneScheduler>(device, *t) : nullptr;
}

}   // namespace nbdsched::sched
