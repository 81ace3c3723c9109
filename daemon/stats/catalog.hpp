// Every number of a device, export, group or queue that `ctl stats` and the
// Prometheus endpoint show, declared once: its JSON key, its column in the
// `ctl stats` table, its Prometheus family and where it is read from. The
// JSON (control/report.cpp), the table (control/render.cpp) and the metric
// families (metrics/families.cpp) are loops over this list, so a new counter
// is one more entry here.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "daemon/stats/counters.hpp"
#include "sched/stats.hpp"

namespace nbdsched::daemon::stats {

enum class Unit {
    count,    // requests, hits, slices: shown as they are
    bytes,    // the table shows "20KiB"
    micros,   // a duration, read in nanoseconds: JSON in microseconds, Prometheus in seconds
    millis,   // a duration, read in nanoseconds: JSON in milliseconds, Prometheus in seconds
};

enum class MetricType {
    counter,
    gauge,
    summary,
};

// A Prometheus family. Its full name is nbdsched_<level>_<name> with level
// device, export or group, so sums over one name never double count; each
// level adds its own labels ({device}, {device,export}, {device,group}).
struct Family {
    std::string_view name;
    MetricType type;
    std::string_view help;
    std::string_view label = {};   // a label that tells the family's stats apart ("op"), if any
};

// What a stat is in its summary family (Prometheus summaries are one metric
// made of a count, a sum and quantiles).
enum class SummaryPart {
    none,
    count,
    sum,
    quantile,
};

struct Stat {
    std::string_view key;      // JSON key; empty: Prometheus only
    std::string_view column;   // `ctl stats` column header; empty: not in the table
    Unit unit = Unit::count;
    const Family* family = nullptr;   // nullptr: not in Prometheus
    std::string_view label = {};      // the value of the family's label
    SummaryPart part = SummaryPart::none;
    double quantile = 0;   // SummaryPart::quantile: which one
    // Exactly one is set: the daemon's counters or the scheduler's view.
    std::uint64_t (*counters)(const Counters&) = nullptr;
    std::uint64_t (*sched)(const sched::EntityStats&) = nullptr;

    bool from_sched() const { return sched != nullptr; }
};

// In `ctl stats` column order; JSON keys come in the same order.
std::span<const Stat> catalog();

// One of the expirations_total stats (why queue turns ended): `ctl stats`
// shows them in a table of their own, a column per reason (the stat's label).
bool is_expiry(const Stat& stat);
bool is_duration(Unit unit);
// A value as its JSON key names it (latency_mean_us, idle_ms); counts and bytes as read.
double in_unit(Unit unit, std::uint64_t raw);
// A value in Prometheus' base units (seconds for durations).
double in_base_unit(Unit unit, std::uint64_t raw);
// The full family name at a level: "nbdsched_" + level + "_" + family.name.
std::string family_name(std::string_view level, const Family& family);

}   // namespace nbdsched::daemon::stats
