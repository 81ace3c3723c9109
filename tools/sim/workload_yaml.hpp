// Reads a simulator workload from YAML (yaml-cpp lives here only; the core
// sched library stays YAML-free). Format, with defaults:
//
//   device:    {profile: ssd, <profile params: queue_depth: 32, ...>}
//   scheduler: {policy: none, <tunables: slice_idle: 8ms, ...>}
//   runtime: 10s          ramp_time: 0          seed: 1
//   groups: {heavy: 1000, light: 100}           # name: weight
//   jobs:
//     - {name: r, group: default, rw: randread, bs: 4k, iodepth: 1, numjobs: 1,
//        sync: true, thinktime: 0, size: 1GiB, offset: <index * size>, start_delay: 0}
//   changes: [{at: 5s, slice_idle: 0}]         # run-time tunable changes
//   pool: {mode: unlimited, nr_requests: 128, batch_requests: 32, batch_time: 20ms}
//   trace: 0              # record depth changes for this long after ramp_time
//
// rw is read | write | randread | randwrite. numjobs N clones a job into
// N queues named name.0 .. name.N-1, each in its own region.
#pragma once

#include <optional>
#include <string>

#include "tools/sim/workload.hpp"

namespace nbdsched::sim {

// Returns an error message, empty on success.
std::string load_workload(const std::string& path, Workload& out);
std::string parse_workload(const std::string& yaml_text, Workload& out);
// "unlimited", "line" or "batching" (the request pool's modes).
std::optional<PoolSpec::Mode> parse_pool_mode(const std::string& text);

}   // namespace nbdsched::sim
