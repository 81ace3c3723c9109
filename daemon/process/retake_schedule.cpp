#include "daemon/process/retake_schedule.hpp"

#include <algorithm>

namespace nbdsched::daemon {

std::chrono::milliseconds RetakeSchedule::failed(const std::string& device, Time now) {
    auto [it, lost_now] = entries_.try_emplace(device);
    auto& e = it->second;
    e.delay = lost_now ? first_ : std::min(e.delay * 2, longest_);
    e.due = now + e.delay;
    return e.delay;
}

void RetakeSchedule::started(const std::string& device) {
    if (auto it = entries_.find(device); it != entries_.end()) it->second.due.reset();
}

std::vector<std::string> RetakeSchedule::due(Time now) const {
    std::vector<std::string> out;
    for (const auto& [device, e] : entries_)
        if (e.due && *e.due <= now) out.push_back(device);
    return out;
}

std::optional<RetakeSchedule::Time> RetakeSchedule::next() const {
    std::optional<Time> first;
    for (const auto& [device, e] : entries_)
        if (e.due && (!first || *e.due < *first)) first = e.due;
    return first;
}

std::chrono::milliseconds RetakeSchedule::delay(const std::string& device) const {
    auto it = entries_.find(device);
    return it == entries_.end() ? std::chrono::milliseconds{} : it->second.delay;
}

}   // namespace nbdsched::daemon
