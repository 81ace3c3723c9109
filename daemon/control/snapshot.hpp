// What `ctl stats` and the metrics endpoint show, copied out of the devices
// while every event loop is paused (DaemonState::exclusive): names and plain
// numbers only, so the pause costs a copy. The JSON (report.hpp) and the
// Prometheus families (metrics/families.hpp) are built from the copy after
// the loops run again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "backend/faulty.hpp"
#include "daemon/control/state.hpp"
#include "daemon/stats/counters.hpp"
#include "sched/stats.hpp"

namespace nbdsched::daemon::control {

// The numbers stats::catalog() reads of one device, export, group or queue,
// in catalog order (a stat read from the scheduler is 0 where it knows no
// such entity). Empty: nothing counted yet, every number 0.
struct Numbers {
    std::vector<std::uint64_t> values;
    std::uint64_t operator[](std::size_t stat) const { return stat < values.size() ? values[stat] : 0; }
};

// The catalog's numbers read from `c` and `s`; either may be null (its stats read 0).
Numbers numbers_of(const stats::Counters* c, const sched::EntityStats* s);

struct GroupNumbers {
    Numbers numbers;
    std::optional<sched::QosGroupStats> qos;   // a group with QoS settings
};

struct QueueSnapshot {
    sched::QueueId id = 0;
    std::string export_name;
    sched::GroupId group = 0;
    std::string peer;
    Numbers numbers;
    std::optional<bool> io_bound;      // bfq: its sync queue's IO_bound mark
    std::optional<bool> idle_window;   // cfq: its sync queue's idle window
};

struct DeviceSnapshot {
    std::string name;
    std::string scheduler;
    bool hw_tag = false;
    bool idling = false;
    bool lock_lost = false;
    int storage_error = 0;   // the backend's remembered failure to persist (an errno), 0: none
    Numbers numbers;
    InflightBudget::Stats inflight;
    std::optional<backend::FaultStats> faults;
    std::optional<backend::CohortStats> cohorts;   // a file device on io_uring with io_cohorts: auto, O_DIRECT
    std::optional<std::uint64_t> memory_bytes;
    std::uint64_t queues_opened = 0;
    std::vector<std::pair<std::string, Numbers>> exports;
    std::vector<GroupNumbers> groups;   // by group id, every group of the table
    std::vector<QueueSnapshot> queues;
};

struct GroupSnapshot {
    std::string name;
    unsigned weight = 0;
    sched::qos::GroupQos qos;
};

struct StatsSnapshot {
    std::vector<GroupSnapshot> groups;   // by group id
    std::vector<DeviceSnapshot> devices;
    std::uint64_t max_inflight_requests = 0;   // limits.max_inflight_per_device
    std::uint64_t max_inflight_bytes = 0;      // limits.max_inflight_bytes_per_device

    // "?" for an id the table did not know.
    const std::string& group_name(sched::GroupId id) const;
};

// Copies the numbers inside state.exclusive().
StatsSnapshot take_snapshot(const DaemonState& state);

}   // namespace nbdsched::daemon::control
