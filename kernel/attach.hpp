// `nbdsched attach`'s work: negotiate the export on N connections, connect
// /dev/nbdN to them over netlink, then watch the device and put new
// connections under it whenever the old ones die (the daemon crashed or was
// restarted): the kernel holds the I/O for up to the dead-connection timeout
// and requeues it onto the new socket.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "kernel/connect.hpp"
#include "kernel/netlink.hpp"

namespace nbdsched::kernel {

struct AttachOptions {
    Target target;
    DeviceConfig device;   // size and server_flags come from the server
    unsigned connections = 1;
    std::chrono::milliseconds handshake_timeout{5000};
    std::chrono::milliseconds retry_interval{100};
};

struct Attached {
    std::uint32_t index = 0;
    nbd::GoResult info;
};

// Negotiates and connects; nullopt with `error` on any refusal.
std::optional<Attached> attach(Netlink& netlink, const AttachOptions& options, std::string& error);

// A device that is already connected (a monitor restarted by systemd): its
// size from sysfs, once its record (attach_record.hpp) shows that attach()
// connected it to the same server and export. nullopt with an empty `error`
// when it is not connected (attach() connects it); nullopt with `error` when
// it is connected to something else or by something else: taking it over
// would put another export's data under whatever lives on the device.
std::optional<Attached> adopt(Netlink& netlink, const AttachOptions& options, std::uint32_t index,
                              std::string& error);

// Whether /dev/nbdN is attached: NBD_CMD_STATUS does not say it is not (on
// 6.12 it sometimes answers without the device) and its size in sysfs is not 0
// (0 once the kernel dropped its configuration). `status_error`: STATUS's
// failure, if it failed.
bool is_attached(Netlink& netlink, std::uint32_t index, std::string& status_error);

// Runs until the device is disconnected (by `nbdsched detach` or
// nbd-client -d); returns the exit code. `events` must have been opened
// before attach() so that no dead link is missed. `probe_first`: try one
// reconnect at once (an adopted device may have lost its link while no
// monitor listened); when no socket is dead the kernel drops the new one and
// the monitor logs that nothing needed replacing, not a reconnect.
int monitor(Netlink& netlink, LinkDeadEvents& events, const AttachOptions& options, const Attached& attached,
            bool probe_first = false);

}   // namespace nbdsched::kernel
