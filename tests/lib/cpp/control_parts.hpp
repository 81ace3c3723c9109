// What control::handle_line() works on, owned together for tests and fuzz
// targets that call it without a running daemon: devices on one io_context,
// the configuration, the export and group tables, and the DaemonState that
// a test points at them once they are filled.
#pragma once

#include <boost/asio/io_context.hpp>
#include <memory>
#include <vector>

#include "config/config.hpp"
#include "daemon/control/state.hpp"
#include "daemon/device/device.hpp"
#include "daemon/tenancy/exports.hpp"
#include "daemon/tenancy/groups.hpp"

namespace nbdsched::testlib {

struct ControlParts {
    boost::asio::io_context io;
    std::vector<std::unique_ptr<daemon::Device>> devices;
    config::Config config;
    daemon::ExportTable exports;
    daemon::GroupTable groups;
    daemon::control::DaemonState state;
};

}   // namespace nbdsched::testlib
