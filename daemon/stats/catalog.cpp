#include "daemon/stats/catalog.hpp"

#include <array>

namespace nbdsched::daemon::stats {

namespace {

std::uint64_t nanos(Nanos d) {
    return d.count() < 0 ? 0 : static_cast<std::uint64_t>(d.count());
}

constexpr Family requests_total{"requests_total", MetricType::counter, "requests completed, by operation", "op"};
constexpr Family bytes_total{"bytes_total", MetricType::counter, "bytes read or written", "op"};
constexpr Family in_flight{"in_flight", MetricType::gauge, "requests submitted to the device and not yet answered"};
constexpr Family latency_seconds{"latency_seconds", MetricType::summary,
                                 "request latency from submit to reply, seconds"};
constexpr Family slices_total{"slices_total", MetricType::counter, "CFQ slices / BFQ budgets started"};
constexpr Family idle_seconds_total{"idle_seconds_total", MetricType::counter,
                                    "time the device was held idle waiting for it"};
constexpr Family readahead_hits_total{"readahead_hits_total", MetricType::counter,
                                      "reads served from the read-ahead cache"};
constexpr Family cancelled_total{"requests_cancelled_total", MetricType::counter,
                                 "reads of a client that had closed, answered without being read"};
constexpr Family errors_total{"errors_total", MetricType::counter, "requests the backend failed"};
constexpr Family dispatched_total{"dispatched_total", MetricType::counter, "requests the scheduler sent to the device"};
constexpr Family refused_total{"refused_connections_total", MetricType::counter,
                               "clients the export's allow: rules refused"};
constexpr Family queued{"queued", MetricType::gauge, "requests waiting in the scheduler"};
constexpr Family expirations_total{"expirations_total", MetricType::counter,
                                   "queue turns at the device (CFQ slices, BFQ budgets) that ended, by why", "reason"};

using C = const Counters&;
using S = const sched::EntityStats&;

template <sched::Expiry reason>
std::uint64_t expired(S s) {
    return s.expirations(reason);
}

// A count of turns that ended for one reason: JSON and Prometheus, not the main table.
constexpr Stat expiry(std::string_view key, std::string_view label, std::uint64_t (*read)(S)) {
    return Stat{.key = key, .column = "", .family = &expirations_total, .label = label, .sched = read};
}

// clang-format off
const std::array stats{
    Stat{.key = "requests", .column = "",
         .counters = [](C c) { return c.requests(); }},
    Stat{.key = "reads", .column = "reads", .family = &requests_total, .label = "read",
         .counters = [](C c) { return c.reads; }},
    Stat{.key = "writes", .column = "writes", .family = &requests_total, .label = "write",
         .counters = [](C c) { return c.writes; }},
    Stat{.key = "flushes", .column = "flushes", .family = &requests_total, .label = "flush",
         .counters = [](C c) { return c.flushes; }},
    Stat{.key = "trims", .column = "trims", .family = &requests_total, .label = "trim",
         .counters = [](C c) { return c.trims; }},
    Stat{.key = "zeroes", .column = "zeroes", .family = &requests_total, .label = "write_zeroes",
         .counters = [](C c) { return c.zeroes; }},
    Stat{.key = "read_bytes", .column = "rd_bytes", .unit = Unit::bytes, .family = &bytes_total, .label = "read",
         .counters = [](C c) { return c.read_bytes; }},
    Stat{.key = "write_bytes", .column = "wr_bytes", .unit = Unit::bytes, .family = &bytes_total, .label = "write",
         .counters = [](C c) { return c.write_bytes; }},
    Stat{.key = "in_flight", .column = "inflt", .family = &in_flight,
         .counters = [](C c) { return c.in_flight; }},
    Stat{.key = "latency_mean_us", .column = "mean_us", .unit = Unit::micros,
         .counters = [](C c) { return nanos(c.latency.mean()); }},
    Stat{.key = "latency_p50_us", .column = "p50_us", .unit = Unit::micros, .family = &latency_seconds,
         .part = SummaryPart::quantile, .quantile = 0.50,
         .counters = [](C c) { return nanos(c.latency.percentile(0.50)); }},
    Stat{.key = "latency_p99_us", .column = "p99_us", .unit = Unit::micros, .family = &latency_seconds,
         .part = SummaryPart::quantile, .quantile = 0.99,
         .counters = [](C c) { return nanos(c.latency.percentile(0.99)); }},
    Stat{.key = "", .column = "", .family = &latency_seconds, .part = SummaryPart::count,
         .counters = [](C c) { return c.latency.count(); }},
    Stat{.key = "", .column = "", .unit = Unit::micros, .family = &latency_seconds, .part = SummaryPart::sum,
         .counters = [](C c) { return nanos(c.latency.total()); }},
    Stat{.key = "slices", .column = "slices", .family = &slices_total,
         .sched = [](S s) { return s.slices; }},
    Stat{.key = "idle_ms", .column = "idle_ms", .unit = Unit::millis, .family = &idle_seconds_total,
         .sched = [](S s) { return nanos(s.idle_time); }},
    Stat{.key = "readahead_hits", .column = "ra_hits", .family = &readahead_hits_total,
         .counters = [](C c) { return c.readahead_hits; }},
    Stat{.key = "cancelled", .column = "", .family = &cancelled_total,
         .counters = [](C c) { return c.cancelled; }},
    Stat{.key = "errors", .column = "errors", .family = &errors_total,
         .counters = [](C c) { return c.errors; }},
    Stat{.key = "refused", .column = "refused", .family = &refused_total,
         .counters = [](C c) { return c.refused; }},
    Stat{.key = "dispatched", .column = "", .family = &dispatched_total,
         .sched = [](S s) { return s.dispatched; }},
    Stat{.key = "completed", .column = "",
         .sched = [](S s) { return s.completed; }},
    Stat{.key = "dispatched_sectors", .column = "",
         .sched = [](S s) { return s.dispatched_sectors; }},
    Stat{.key = "queued", .column = "", .family = &queued,
         .sched = [](S s) { return s.queued; }},
    Stat{.key = "in_flight", .column = "",
         .sched = [](S s) { return s.in_flight; }},
    // Labels are sched::to_string(reason), keys "expired_" + the label (unit-daemon-catalog checks both).
    expiry("expired_too_idle", "too_idle", expired<sched::Expiry::too_idle>),
    expiry("expired_budget_timeout", "budget_timeout", expired<sched::Expiry::budget_timeout>),
    expiry("expired_budget_exhausted", "budget_exhausted", expired<sched::Expiry::budget_exhausted>),
    expiry("expired_no_more_requests", "no_more_requests", expired<sched::Expiry::no_more_requests>),
    expiry("expired_preempted", "preempted", expired<sched::Expiry::preempted>),
    expiry("expired_seeky_turn_ended", "seeky_turn_ended", expired<sched::Expiry::seeky_turn_ended>),
    expiry("expired_slice_used", "slice_used", expired<sched::Expiry::slice_used>),
    expiry("expired_closed", "closed", expired<sched::Expiry::closed>),
};
// clang-format on

}   // namespace

std::span<const Stat> catalog() {
    return stats;
}

bool is_expiry(const Stat& stat) {
    return stat.family == &expirations_total;
}

bool is_duration(Unit unit) {
    return unit == Unit::micros || unit == Unit::millis;
}

double in_unit(Unit unit, std::uint64_t raw) {
    auto v = static_cast<double>(raw);
    switch (unit) {
    case Unit::micros: return v / 1e3;
    case Unit::millis: return v / 1e6;
    case Unit::count:
    case Unit::bytes: break;
    }
    return v;
}

double in_base_unit(Unit unit, std::uint64_t raw) {
    auto v = static_cast<double>(raw);
    return is_duration(unit) ? v / 1e9 : v;
}

std::string family_name(std::string_view level, const Family& family) {
    return "nbdsched_" + std::string(level) + "_" + std::string(family.name);
}

}   // namespace nbdsched::daemon::stats
