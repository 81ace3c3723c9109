// What the control socket, SIGHUP reload and the metrics endpoint act on:
// the server's live parts, borrowed. Everything here is touched only on
// loop 0's thread, and devices (which may run on other loops) only inside
// exclusive().
#pragma once

#include <functional>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "daemon/device/device.hpp"
#include "daemon/tenancy/exports.hpp"
#include "daemon/tenancy/groups.hpp"

namespace nbdsched::daemon::control {

// What `nbdsched ctl` changed since the file was loaded (weights, tunables,
// the faults switch, a group's reserve/limit/latency target), by name: a
// SIGHUP keeps each unless the file changes it, and then forgets it; a
// planned restart carries them on by the same rule (live_changes.hpp).
struct ChangedByCtl {
    std::set<std::string> weights;                            // groups
    std::set<std::pair<std::string, std::string>> tunables;   // device, tunable
    std::set<std::string> faults;                             // devices
    std::set<std::string> qos;                                // groups
};

// What a reload did: whether the file's configuration is in force now, and
// why not (each reason), or what it changed.
struct ReloadResult {
    bool applied = false;
    std::vector<std::string> messages;
};

struct DaemonState {
    config::Config* config = nullptr;                          // the config in force
    std::vector<std::unique_ptr<Device>>* devices = nullptr;   // parallel to config->devices
    ExportTable* exports = nullptr;                            // parallel to config->exports
    GroupTable* groups = nullptr;
    // Runs `f` with every other event loop paused (daemon/process/event_loops.hpp); unset: directly.
    std::function<void(const std::function<void()>&)> run_exclusive{};
    // Whether taking back a device's lock after a failed hand-over failed:
    // its writes fail (EROFS) until a retry gets it (the server's record,
    // daemon/process/lost_locks.hpp, is a floor above). Unset: none.
    std::function<bool(const std::string& device)> locks_lost{};
    ChangedByCtl changed_by_ctl{};
    // Re-reads the configuration file (what SIGHUP does), for `ctl reload`. Unset: none.
    std::function<ReloadResult()> reload{};

    bool lock_lost(const std::string& device) const { return locks_lost && locks_lost(device); }

    void exclusive(const std::function<void()>& f) const {
        if (run_exclusive)
            run_exclusive(f);
        else
            f();
    }
    Device* find_device(std::string_view name) const;
};

}   // namespace nbdsched::daemon::control
