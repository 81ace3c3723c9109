// Who may open an export: its allow: rules (config::AllowRule) against the
// peer taken at accept (classify.hpp). Any one rule admits; no rules admit
// everyone who reaches the socket. Pure: the peer is already read.
#pragma once

#include <vector>

#include "config/config.hpp"
#include "daemon/tenancy/classify.hpp"

namespace nbdsched::daemon {

// Whether one rule names this peer. uid/gid/user/group and cgroup need a unix
// peer, address a TCP one, tls_identity a TLS session.
bool allow_rule_matches(const config::AllowRule& rule, const PeerInfo& peer);

// The first rule that admits the peer, or nullptr (also for an empty list:
// ask allowed() for the answer).
const config::AllowRule* admitting_rule(const std::vector<config::AllowRule>& allow, const PeerInfo& peer);

bool allowed(const std::vector<config::AllowRule>& allow, const PeerInfo& peer);

}   // namespace nbdsched::daemon
