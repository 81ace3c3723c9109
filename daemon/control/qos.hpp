// Reservations, limits and latency targets of the running daemon: applying a
// group's settings on every device (ctl reserve|limit|latency-target, SIGHUP
// reload, start-up), the reservation-sum check, and their report.
#pragma once

#include <string>
#include <vector>

#include "daemon/control/report.hpp"
#include "daemon/control/state.hpp"

namespace nbdsched::daemon::control {

// Sets `qos` for `group` on every device's QoS layer and in the group table.
// Returns the error (nothing applied), else empty; `warnings` gets the
// reservation-sum warnings of every device (qos_warnings).
std::string apply_qos(DaemonState& state, const std::string& group, const sched::qos::GroupQos& qos,
                      std::vector<std::string>& warnings);

// "device d0: reservations add up to 250 IOPS, 70 IOPS (39%) above the 180 IOPS
// its hdd profile serves": one line per exceeded rate, none when it fits or the
// capacity is unknown (no timing profile).
std::vector<std::string> qos_warnings(const Device& device, const GroupTable& groups);

// The reply to {"cmd": "reserve"|"limit"|"latency-target", "group": ..., ...}.
Json qos_command(const Json& request, DaemonState& state);

// A group's QoS settings and counters for `ctl stats` (durations in ms).
Json qos_json(const sched::qos::GroupQos& settings, const sched::QosGroupStats& stats);

}   // namespace nbdsched::daemon::control
