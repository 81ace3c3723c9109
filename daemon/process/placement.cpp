#include "daemon/process/placement.hpp"

#include <spdlog/spdlog.h>

#include "common/utf8.hpp"
#include "daemon/control/commands.hpp"

namespace nbdsched::daemon {

sched::GroupId place_connection(control::DaemonState& state, const PeerInfo& peer, const std::string& export_name,
                                sched::GroupId export_group, const std::string& cgroup_root) {
    const auto* rule = match_rule(state.config->rules, peer, export_name);
    if (!rule) return export_group;
    auto id = state.groups->find(rule->group);
    if (!id) {   // validated configs name existing groups; be safe anyway
        spdlog::warn("rule {}: no group {}", rule->origin.str(), rule->group);
        return export_group;
    }
    const auto& entry = state.groups->at(*id);
    if (entry.weight_from_cgroup && !peer.cgroup.empty()) {
        auto w = cgroup_weight(peer.cgroup, cgroup_root);
        if (!w) {
            spdlog::debug("group {}: cgroup {} has no io weight; keeping {}", entry.name, printable(peer.cgroup),
                          entry.weight);
        } else if (*w != entry.weight) {
            spdlog::info("group {}: weight {} from cgroup {}", entry.name, *w, printable(peer.cgroup));
            control::apply_weight(state, entry.name, *w);
        }
    }
    spdlog::debug("{} on export {}: rule {} -> group {}", peer.describe(), export_name, rule->origin.str(), rule->group);
    return *id;
}

}   // namespace nbdsched::daemon
