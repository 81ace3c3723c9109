// The Prometheus metric families of a running daemon, built from the same
// counters `ctl stats` shows. Each level has its own metric names so sums
// never double count: nbdsched_device_*{device}, nbdsched_export_*{device,
// export}, nbdsched_group_*{device,group}. Built from a snapshot
// (control/snapshot.hpp), on any thread.
#pragma once

#include <prometheus/metric_family.h>
#include <vector>

#include "daemon/control/snapshot.hpp"
#include "daemon/control/state.hpp"

namespace nbdsched::daemon::metrics {

std::vector<prometheus::MetricFamily> collect(const control::StatsSnapshot& snapshot);
// take_snapshot(state), then the above.
std::vector<prometheus::MetricFamily> collect(const control::DaemonState& state);

}   // namespace nbdsched::daemon::metrics
