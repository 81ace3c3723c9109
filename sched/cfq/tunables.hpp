// CFQ tunables with the kernel's sysfs names, defaults and clamping
// (cfq_attrs[] / cfq_init_queue() / cfq_registered_queue() in Linux 4.x).
// Names, defaults, ranges and docs are the rows of table() in tunables.cpp.
#pragma once

#include "common/units.hpp"
#include "sched/tunable_table.hpp"

namespace nbdsched::sched::cfq {

// The values the scheduler runs with; table().defaults(device) fills them.
struct CfqTunables {
    unsigned quantum;
    Nanos fifo_expire_sync;
    Nanos fifo_expire_async;
    unsigned back_seek_max;   // KiB
    unsigned back_seek_penalty;
    Nanos slice_sync;
    Nanos slice_async;
    unsigned slice_async_rq;
    Nanos slice_idle;   // `auto` resolved for the device (seed 000)
    Nanos group_idle;   // 8ms on every device (seed 003)
    bool low_latency;
    Nanos target_latency;
    unsigned iops_charge_kb;          // 0: one per request, as the kernel
    unsigned contended_seeky_depth;   // 0: off, as the kernel

    // Base slice by sync flag (the kernel's cfq_slice[2]).
    Nanos slice(bool sync) const { return sync ? slice_sync : slice_async; }
    Nanos fifo_expire(bool sync) const { return sync ? fifo_expire_sync : fifo_expire_async; }
};

const TunableTable<CfqTunables>& table();

}   // namespace nbdsched::sched::cfq
