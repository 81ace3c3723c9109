// SIGHUP reload, the pure half: what differs between the config in force and
// the one just loaded, and whether it can apply to a running daemon.
//
// Applies live: group weights, reserve/limit/latency_target and new groups, scheduler tunables, rules, an
// export's group (and a device's default_group), export descriptions and
// allow: rules, the log level (and, read by reload.cpp, what the tls: files
// hold). Anything else -- listeners, the control/metrics addresses,
// devices added/removed or their backend, size, path, profile, scheduler
// policy, queue depth, read-ahead, writes_sync, faults, exports added/removed/moved,
// limits -- would need the daemon restarted: such a reload is refused as a
// whole and the old configuration stays.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"

namespace nbdsched::daemon {

struct ReloadPlan {
    std::vector<std::string> refused;    // why it cannot apply; non-empty = apply nothing
    std::vector<config::Group> groups;   // new groups and groups whose weight or QoS changed
    // device name -> tunables whose value changed (or were added)
    std::vector<std::pair<std::string, sched::Tunables>> tunables;
    // export index -> the group name its new connections get
    std::vector<std::pair<std::size_t, std::string>> export_groups;
    std::vector<std::size_t> export_allow;   // exports whose allow: rules changed
    std::vector<std::string> notes;          // what changes, one log line each
    bool rules_changed = false;

    bool ok() const { return refused.empty(); }
};

ReloadPlan plan_reload(const config::Config& old, const config::Config& next);

}   // namespace nbdsched::daemon
