// The exports clients can pick, as the handshake sees them (ExportInfo) and
// as the transmission phase uses them (device, window, group).
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "daemon/device/device.hpp"
#include "nbd/negotiation.hpp"
#include "sched/request.hpp"

namespace nbdsched::daemon {

struct ExportBinding {
    Device* device = nullptr;
    std::uint64_t offset = 0;   // the export's window starts here on the device
    bool read_only = false;
    sched::GroupId group = 0;
    std::vector<config::AllowRule> allow;   // who may open it (access.hpp); empty: everyone
};

struct ExportTable {
    std::vector<nbd::ExportInfo> infos;    // what negotiation offers
    std::vector<ExportBinding> bindings;   // parallel to infos

    const ExportBinding& binding_of(const nbd::ExportInfo* info) const {
        return bindings[static_cast<std::size_t>(info - infos.data())];
    }
};

}   // namespace nbdsched::daemon
