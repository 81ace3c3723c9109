// What an operator asks of a group beside its weight: a floor (reserve), a
// ceiling (limit, with a burst allowance) and a latency target. Plain data,
// shared by config/, the control socket and the simulator.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

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

// What may be asked, the same through the configuration and `nbdsched ctl`
// (0 means "not set", so it is never a value: `off` or leaving the key out
// clears). Each check below gives empty, or the words both use.
inline constexpr std::uint64_t min_iops = 1, max_iops = 100'000'000;
// One 4 KiB request a second: below it a byte rate is a typo (`bps: 100`
// meant as 100MiB held each 4 KiB read 41 s and looked like a hang), not a
// wish, so it is refused rather than taken.
inline constexpr std::uint64_t min_bps = 4096;

struct DurationRange {
    Nanos min, max;
    const char* example;
};
inline constexpr DurationRange burst_range{std::chrono::milliseconds(1), std::chrono::seconds(10), "100ms"};
inline constexpr DurationRange latency_target_range{std::chrono::microseconds(100), std::chrono::seconds(10), "10ms"};

// "out of range: 0 (allowed 1..100000000)"
std::string check_iops(std::uint64_t iops);
// "bps must be above 0 (leave it out for no byte rate)", or for 1..4095
// "bps 100B is below 4KiB, one 4KiB request a second (bps is bytes per second: 100MiB for 100 MiB/s)"
std::string check_bps(std::uint64_t bps);
// "expected a duration from 1ms to 10s, e.g. 100ms, got '10min'" when `value`
// (what `text` parsed to, nullopt if it did not) is outside `range`.
std::string check_duration(const DurationRange& range, std::optional<Nanos> value, std::string_view text);

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
// "reserve iops 60, limit bps 20MiB (burst 100ms), latency target none".
std::string to_string(const GroupQos& qos);
// Empty, or why the settings contradict each other ("limit iops 20 is below reserve iops 60").
std::string check(const GroupQos& qos);

}   // namespace nbdsched::sched::qos
