// Where a new connection's queue goes: the group of the first rule matching
// the peer and export, else the export's group (which already falls back to
// the device's default_group). A rule's group with `weight: from-cgroup`
// takes the weight of the cgroup the rule names (io.bfq.weight / io.weight)
// on every device as a connection arrives; a rule without a cgroup leaves it.
#pragma once

#include <string>

#include "daemon/tenancy/classify.hpp"
#include "daemon/control/state.hpp"

namespace nbdsched::daemon {

sched::GroupId place_connection(control::DaemonState& state, const PeerInfo& peer, const std::string& export_name,
                                sched::GroupId export_group, const std::string& cgroup_root = "");

}   // namespace nbdsched::daemon
