// CFQ tunables with the kernel's sysfs names, defaults and clamping
// (cfq_attrs[] / cfq_init_queue() / cfq_registered_queue() in Linux 4.x).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/units.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sched::cfq {

struct CfqTunables {
    unsigned quantum = 8;
    Nanos fifo_expire_sync = std::chrono::milliseconds(125);   // NSEC_PER_SEC/8
    Nanos fifo_expire_async = std::chrono::milliseconds(250);  // NSEC_PER_SEC/4
    unsigned back_seek_max = 16 * 1024;                        // KiB
    unsigned back_seek_penalty = 2;
    Nanos slice_sync = std::chrono::milliseconds(100);
    Nanos slice_async = std::chrono::milliseconds(40);
    unsigned slice_async_rq = 2;
    // Seed 000: "auto" = 8ms on a rotational device, 0 (IOPS mode) otherwise.
    Nanos slice_idle = std::chrono::milliseconds(8);
    bool slice_idle_auto = true;
    // Seed 003: group_idle stays 8ms on every device so group weights hold.
    Nanos group_idle = std::chrono::milliseconds(8);
    bool low_latency = true;
    Nanos target_latency = std::chrono::milliseconds(300);

    // Base slice by sync flag (the kernel's cfq_slice[2]).
    Nanos slice(bool sync) const { return sync ? slice_sync : slice_async; }
    Nanos fifo_expire(bool sync) const { return sync ? fifo_expire_sync : fifo_expire_async; }
};

std::vector<std::string> tunable_names();

// Defaults for this device (resolves slice_idle auto).
CfqTunables default_tunables(const DeviceTraits& device);

// Parses and stores one tunable; returns an error message, empty on success.
// Out-of-range numbers are clamped like the kernel's sysfs store functions.
std::string set_tunable(CfqTunables& t, const DeviceTraits& device, std::string_view name,
                        std::string_view value);
std::optional<std::string> get_tunable(const CfqTunables& t, std::string_view name);

} // namespace nbdsched::sched::cfq
