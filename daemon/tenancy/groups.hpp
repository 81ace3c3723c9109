// The daemon's groups by name: a group's id is its index in the first
// config's `groups:` list (as setup.cpp numbers them) and never changes
// while the daemon runs; groups a reloaded config adds get the next ids.
// The weight is what every device's scheduler was last told.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "sched/qos/spec.hpp"
#include "sched/request.hpp"

namespace nbdsched::daemon {

class GroupTable {
public:
    struct Entry {
        std::string name;
        unsigned weight = 100;
        bool weight_from_cgroup = false;
        sched::qos::GroupQos qos;   // what every device's QoS layer was last told
    };

    GroupTable() = default;
    explicit GroupTable(const std::vector<config::Group>& groups);

    std::optional<sched::GroupId> find(std::string_view name) const;
    // Adds the group (or updates its entry); its id.
    sched::GroupId upsert(const config::Group& group);
    void set_weight(sched::GroupId id, unsigned weight) { entries_.at(id).weight = weight; }
    void set_qos(sched::GroupId id, const sched::qos::GroupQos& qos) { entries_.at(id).qos = qos; }

    const Entry& at(sched::GroupId id) const { return entries_.at(id); }
    std::size_t size() const { return entries_.size(); }
    const std::vector<Entry>& entries() const { return entries_; }
    // "?" for an id the table does not know.
    std::string name_of(sched::GroupId id) const;

private:
    std::vector<Entry> entries_;
};

}   // namespace nbdsched::daemon
