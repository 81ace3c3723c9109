#include "sched/bfq/tunables.hpp"

namespace nbdsched::sched::bfq {
namespace {

using namespace std::chrono_literals;
using T = BfqTunables;

std::uint64_t budget_auto(const DeviceTraits&) { return 0; }

// bfq_strict_guarantees_store: turning it on raises slice_idle to at least
// 8ms, since strict guarantees need real idling.
void raise_slice_idle(T& now, const T& before) {
    if (now.strict_guarantees && !before.strict_guarantees && now.slice_idle < 8ms) now.slice_idle = 8ms;
}

// Times are at least 1ms (the kernel: at least 1 jiffy), except the idles,
// which 0 turns off.
// Rows laid out by hand, one tunable per block.
// clang-format off
constexpr Tunable<T> kRows[] = {
    {{.name = "slice_idle", .unit = Unit::duration, .default_value = "auto", .auto_value = kIdleOnRotational,
      .why = "how long to idle for the in-service queue; 0 disables idling for throughput (see the note below)"},
     field<&T::slice_idle>},
    {{.name = "group_idle", .unit = Unit::duration, .default_value = "8ms",
      .why = "**nbdsched extension**: with `slice_idle` 0, the idle time used where idling is needed for service "
             "guarantees (groups with pending I/O); 0 disables that too"},
     field<&T::group_idle>},
    {{.name = "strict_guarantees", .unit = Unit::flag, .default_value = "0",
      .why = "1: always idle when the in-service queue empties, and dispatch only when nothing is in flight (one "
             "request at a time). Turning it on raises `slice_idle` to at least 8 ms, as in the kernel"},
     field<&T::strict_guarantees>, raise_slice_idle},
    {{.name = "low_latency", .unit = Unit::flag, .default_value = "1",
      .why = "accepted for compatibility; weight raising is **not implemented**, so it has no effect"},
     field<&T::low_latency>},
    {{.name = "timeout_sync", .unit = Unit::duration, .default_value = "125ms", .min = in_ns(1ms),
      .why = "budget timeout: the longest a queue keeps the device per budget"},
     field<&T::timeout_sync>},
    {{.name = "max_budget", .unit = Unit::sectors, .default_value = "auto", .max = 0x7fffffff,
      .auto_value = {budget_auto, "0, which is 16384 sectors until enough samples, then peak rate × `timeout_sync`"},
      .why = "largest budget in sectors"},
     field<&T::max_budget>},
    {{.name = "back_seek_max", .unit = Unit::kib, .default_value = "16384",
      .why = "how far behind the head the elevator may go"},
     field<&T::back_seek_max>},
    {{.name = "back_seek_penalty", .unit = Unit::count, .default_value = "2", .min = 1, .max = 1u << 20,
      .why = "cost multiplier of a backward seek"},
     field<&T::back_seek_penalty>},
    {{.name = "fifo_expire_sync", .unit = Unit::duration, .default_value = "125ms", .min = in_ns(1ms),
      .why = "age after which a sync request is served out of elevator order"},
     field<&T::fifo_expire_sync>},
    {{.name = "fifo_expire_async", .unit = Unit::duration, .default_value = "250ms", .min = in_ns(1ms),
      .why = "same for async requests"},
     field<&T::fifo_expire_async>},
    {{.name = "contended_seeky_depth", .unit = Unit::count, .default_value = "1",
      .why = "**nbdsched extension**: on a rotational device, while another group has I/O, a seeky sync queue keeps "
             "at most this many requests at the device and its turn ends when they complete; it stays scheduled, "
             "so B-WF2Q+ alternates the groups by weight a request at a time; 0: off, as the kernel"},
     field<&T::contended_seeky_depth>},
};
// clang-format on

}   // namespace

const TunableTable<BfqTunables>& table() {
    static constexpr TunableTable<BfqTunables> kTable{"bfq", kRows};
    return kTable;
}

}   // namespace nbdsched::sched::bfq
