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
    // The cgroup the rule names, not the peer's own: a tenant with a delegated
    // subtree sets its children's io.weight (which in the kernel only splits
    // its own share) and must not pick its group's weight on every device that way.
    if (entry.weight_from_cgroup && rule->cgroup && !peer.cgroup.empty()) {
        const std::string& named = *rule->cgroup;
        auto w = cgroup_weight(named, cgroup_root);
        if (!w) {
            spdlog::debug("group {}: cgroup {} has no io weight; keeping {}", entry.name, printable(named),
                          entry.weight);
        } else if (*w != entry.weight) {
            spdlog::info("group {}: weight {} from cgroup {}", entry.name, *w, printable(named));
            control::apply_weight(state, entry.name, *w);
        }
    }
    spdlog::debug("{} on export {}: rule {} -> group {}", peer.describe(), export_name, rule->origin.str(), rule->group);
    return *id;
}

}   // namespace nbdsched::daemon
