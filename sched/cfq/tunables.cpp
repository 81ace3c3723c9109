#include "sched/cfq/tunables.hpp"

namespace nbdsched::sched::cfq {
namespace {

using namespace std::chrono_literals;
using T = CfqTunables;

// The kernel's store functions clamp times to at least 1 jiffy-ish (1ms here)
// and counts to at least 1; slice_idle and group_idle may be 0 (off).
// Rows laid out by hand, one tunable per block.
// clang-format off
constexpr Tunable<T> kRows[] = {
    {{.name = "slice_idle", .unit = Unit::duration, .default_value = "auto", .auto_value = kIdleOnRotational,
      .why = "how long to wait for the next request of a sequential sync queue before switching queues. 0 turns "
             "queue idling off, and on a queueing device switches group charging to IOPS mode"},
     field<&T::slice_idle>},
    {{.name = "group_idle", .unit = Unit::duration, .default_value = "8ms",
      .why = "how long to wait for a group's last queue before switching groups; keeps group weights working when "
             "`slice_idle` is 0"},
     field<&T::group_idle>},
    {{.name = "slice_sync", .unit = Unit::duration, .default_value = "100ms", .min = in_ns(1ms),
      .why = "time slice of a sync queue"},
     field<&T::slice_sync>},
    {{.name = "slice_async", .unit = Unit::duration, .default_value = "40ms", .min = in_ns(1ms),
      .why = "time slice of an async queue"},
     field<&T::slice_async>},
    {{.name = "slice_async_rq", .unit = Unit::count, .default_value = "2", .min = 1,
      .why = "async request budget per slice: `2 * slice_async_rq * 4` dispatches"},
     field<&T::slice_async_rq>},
    {{.name = "quantum", .unit = Unit::count, .default_value = "8", .min = 1,
      .why = "requests a queue may have in flight (`quantum/2` normally, `quantum` early in a slice)"},
     field<&T::quantum>},
    {{.name = "fifo_expire_sync", .unit = Unit::duration, .default_value = "125ms", .min = in_ns(1ms),
      .why = "age after which a sync request is served before the elevator's choice (once per slice)"},
     field<&T::fifo_expire_sync>},
    {{.name = "fifo_expire_async", .unit = Unit::duration, .default_value = "250ms", .min = in_ns(1ms),
      .why = "the same for async requests"},
     field<&T::fifo_expire_async>},
    {{.name = "back_seek_max", .unit = Unit::kib, .default_value = "16384",
      .why = "how far behind the head the elevator may seek back"},
     field<&T::back_seek_max>},
    {{.name = "back_seek_penalty", .unit = Unit::count, .default_value = "2", .min = 1,
      .why = "cost multiplier of a backward seek"},
     field<&T::back_seek_penalty>},
    {{.name = "low_latency", .unit = Unit::flag, .default_value = "1",
      .why = "scale slices so every busy queue of a group is served within `target_latency`; ramp up async depth "
             "slowly"},
     field<&T::low_latency>},
    {{.name = "target_latency", .unit = Unit::duration, .default_value = "300ms", .min = in_ns(1ms),
      .why = "the latency `low_latency` aims for"},
     field<&T::target_latency>},
    {{.name = "iops_charge_kb", .unit = Unit::kib, .default_value = "8",
      .why = "in IOPS mode a request costs its group one unit per started `iops_charge_kb` of its size, so a "
             "group is not favoured for sending larger requests; 0: one unit per request, as the kernel"},
     field<&T::iops_charge_kb>},
    {{.name = "contended_seeky_depth", .unit = Unit::count, .default_value = "1",
      .why = "on a rotational device, while another group is busy, a seeky queue keeps at most this many requests "
             "at the device and its slice ends at its first completion, so the other group waits for about one "
             "request; 0: off, as the kernel"},
     field<&T::contended_seeky_depth>},
};
// clang-format on

}   // namespace

const TunableTable<CfqTunables>& table() {
    static constexpr TunableTable<CfqTunables> kTable{"cfq", kRows};
    return kTable;
}

}   // namespace nbdsched::sched::cfq
