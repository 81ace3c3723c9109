// What the control socket, SIGHUP reload and the metrics endpoint act on:
// the server's live parts, borrowed. Everything here is touched only on the
// event loop thread.
#pragma once

#include <memory>
#include <vector>

#include "config/config.hpp"
#include "daemon/device/device.hpp"
#include "daemon/tenancy/exports.hpp"
#include "daemon/tenancy/groups.hpp"

namespace nbdsched::daemon::control {

struct DaemonState {
    config::Config* config = nullptr;                          // the config in force
    std::vector<std::unique_ptr<Device>>* devices = nullptr;   // parallel to config->devices
    ExportTable* exports = nullptr;                            // parallel to config->exports
    GroupTable* groups = nullptr;

    Device* find_device(std::string_view name) const;
};

}   // namespace nbdsched::daemon::control
