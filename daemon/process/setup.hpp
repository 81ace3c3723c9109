// Turning a validated configuration into running parts: devices (backend +
// scheduler + timing model) and the export table clients negotiate against.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "daemon/device/device.hpp"
#include "daemon/tenancy/exports.hpp"

namespace nbdsched::daemon {

// GroupId of a group name: its index in config.groups (0 when unknown).
sched::GroupId group_id(const config::Config& config, const std::string& name);

// nullptr and `error` (naming the device) when a part cannot be built;
// what opening its storage changed is undone then (undo_open).
std::unique_ptr<Device> build_device(boost::asio::io_context& io, boost::asio::thread_pool& pool,
                                     const config::Device& device, const config::Config& config,
                                     std::string& error);

// A start that failed: what opening `backend` changed in its storage (a
// file grown or created for the start) goes back, logged for `device`.
void undo_open(const std::string& device, backend::Backend& backend);

// `devices` is parallel to config.devices. False and `error` when an export
// does not fit its device (a file's real size can differ from the config).
bool build_exports(const config::Config& config, const std::vector<std::unique_ptr<Device>>& devices,
                   ExportTable& table, std::string& error);

}   // namespace nbdsched::daemon
