#include "daemon/process/lost_locks.hpp"

#include <algorithm>

namespace nbdsched::daemon {

const LostLocks::Lost& LostLocks::failed(const std::string& device, Time now) {
    auto [it, lost_now] = entries_.try_emplace(device);
    auto& e = it->second;
    ++e.failures;
    e.delay = lost_now ? first_ : std::min(e.delay * 2, longest_);
    e.due = now + e.delay;
    return e;
}

unsigned LostLocks::back(const std::string& device) {
    auto it = entries_.find(device);
    if (it == entries_.end()) return 0;
    const unsigned failures = it->second.failures;
    entries_.erase(it);
    return failures;
}

void LostLocks::started(const std::string& device) {
    if (auto it = entries_.find(device); it != entries_.end()) it->second.due.reset();
}

std::vector<std::string> LostLocks::due(Time now) const {
    std::vector<std::string> out;
    for (const auto& [device, e] : entries_)
        if (e.due && *e.due <= now) out.push_back(device);
    return out;
}

std::optional<LostLocks::Time> LostLocks::next() const {
    std::optional<Time> first;
    for (const auto& [device, e] : entries_)
        if (e.due && (!first || *e.due < *first)) first = e.due;
    return first;
}

const LostLocks::Lost* LostLocks::find(const std::string& device) const {
    auto it = entries_.find(device);
    return it == entries_.end() ? nullptr : &it->second;
}

}   // namespace nbdsched::daemon
