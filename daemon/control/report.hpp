// The JSON documents `ctl list`, `ctl stats` and `ctl faults` return (the
// human output is rendered from the same documents by the client, see render.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include "backend/faulty.hpp"
#include "daemon/control/snapshot.hpp"
#include "daemon/control/state.hpp"
#include "daemon/stats/counters.hpp"
#include "sched/stats.hpp"

namespace nbdsched::daemon::control {

using Json = nlohmann::ordered_json;

// The reply to a request that failed: {"ok": false, "error": message}.
Json error_reply(const std::string& message);

// The keys of stats::catalog() read from the daemon's counters (reads, ..., latency_p99_us)
// and from the scheduler's view (slices, idle_ms, dispatched, ...).
Json counters_json(const Numbers& n);
Json sched_json(const Numbers& n);
Json counters_json(const stats::Counters& c);
Json sched_json(const sched::EntityStats& s);

// Reads the devices: inside exclusive().
Json list_json(const DaemonState& state);
// Built from a snapshot (take_snapshot), with the loops running.
Json stats_json(const StatsSnapshot& snapshot);
// take_snapshot(state), then the above.
Json stats_json(const DaemonState& state);
// device, enabled, rules (how many), faults (the counts `stats` shows under `faults`).
Json fault_switch_json(const std::string& device, const backend::FaultyBackend& faulty);

}   // namespace nbdsched::daemon::control
