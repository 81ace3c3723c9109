#include "daemon/tenancy/access.hpp"

namespace nbdsched::daemon {

bool allow_rule_matches(const config::AllowRule& rule, const PeerInfo& peer) {
    if (rule.uid) return peer.uid == rule.uid;
    if (rule.gid) return in_group(peer, *rule.gid);
    if (rule.cgroup) return !peer.cgroup.empty() && cgroup_matches(*rule.cgroup, peer.cgroup);
    if (rule.address) return !peer.is_unix && !peer.address.empty() && address_matches(*rule.address, peer.address);
    if (rule.tls_identity) return peer.tls_identity == rule.tls_identity;
    return false;   // a rule with no field admits nobody (the config loader never makes one)
}

const config::AllowRule* admitting_rule(const std::vector<config::AllowRule>& allow, const PeerInfo& peer) {
    for (const auto& rule : allow)
        if (allow_rule_matches(rule, peer)) return &rule;
    return nullptr;
}

bool allowed(const std::vector<config::AllowRule>& allow, const PeerInfo& peer) {
    return allow.empty() || admitting_rule(allow, peer) != nullptr;
}

}   // namespace nbdsched::daemon
