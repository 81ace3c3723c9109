#include "daemon/tenancy/groups.hpp"

namespace nbdsched::daemon {

GroupTable::GroupTable(const std::vector<config::Group>& groups) {
    for (const auto& g : groups) upsert(g);
}

std::optional<sched::GroupId> GroupTable::find(std::string_view name) const {
    for (std::size_t i = 0; i < entries_.size(); ++i)
        if (entries_[i].name == name) return static_cast<sched::GroupId>(i);
    return std::nullopt;
}

sched::GroupId GroupTable::upsert(const config::Group& group) {
    auto id = find(group.name);
    if (!id) {
        entries_.push_back({group.name, group.weight, group.weight_from_cgroup, group.qos});
        return static_cast<sched::GroupId>(entries_.size() - 1);
    }
    entries_[*id].weight = group.weight;
    entries_[*id].weight_from_cgroup = group.weight_from_cgroup;
    entries_[*id].qos = group.qos;
    return *id;
}

std::string GroupTable::name_of(sched::GroupId id) const {
    return id < entries_.size() ? entries_[id].name : std::string("?");
}

}   // namespace nbdsched::daemon
