// What an operator asks of a group beside its weight: a floor (reserve), a
// ceiling (limit, with a burst allowance) and a latency target. Plain data,
// shared by config/, the control socket and the simulator.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "common/units.hpp"

namespace nbdsched::sched::qos {

// Requests and bytes per second; 0 = not set.
struct Rate {
    std::uint64_t iops = 0;
    std::uint64_t bps = 0;
    bool set() const { return iops != 0 || bps != 0; }
    bool operator==(const Rate&) const = default;
};

inline constexpr Nanos default_burst = std::chrono::milliseconds(100);

struct GroupQos {
    Rate reserve;                  // served ahead of the policy while below it
    Rate limit;                    // never more than this (like cgroup v2 io.max)
    Nanos burst = default_burst;   // what the limit lets through at once: burst * rate
    Nanos latency_target{0};       // 0 = none; like io.latency: others yield while its p90 misses
    bool any() const { return reserve.set() || limit.set() || latency_target.count() > 0; }
    bool operator==(const GroupQos&) const = default;
};

// "iops 200, bps 20MiB" ("none" when unset).
std::string to_string(const Rate& rate);
// Empty, or why the settings contradict each other ("limit iops 20 is below reserve iops 60").
std::string check(const GroupQos& qos);

}   // namespace nbdsched::sched::qos
