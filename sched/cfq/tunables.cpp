#include "sched/cfq/tunables.hpp"

#include <algorithm>

#include <charconv>
#include <limits>

namespace nbdsched::sched::cfq {
namespace {

using namespace std::chrono_literals;

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

std::optional<unsigned> parse_count(std::string_view text) {
    text = trim(text);
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) return std::nullopt;
    return value;
}

// back_seek_max: a bare number is KiB (sysfs); "16MiB" style sizes are accepted too.
std::optional<unsigned> parse_kib(std::string_view text) {
    if (auto bare = parse_count(text)) return bare;
    auto bytes = parse_size(text);
    if (!bytes || *bytes / 1024 > std::numeric_limits<unsigned>::max()) return std::nullopt;
    return unsigned(*bytes / 1024);
}

std::optional<bool> parse_bool(std::string_view text) {
    text = trim(text);
    if (text == "1" || text == "true" || text == "on" || text == "yes") return true;
    if (text == "0" || text == "false" || text == "off" || text == "no") return false;
    return std::nullopt;
}

Nanos auto_slice_idle(const DeviceTraits& device) { return device.rotational ? 8ms : 0ns; }

struct DurationField { std::string_view name; Nanos CfqTunables::*field; Nanos min; };
struct CountField { std::string_view name; unsigned CfqTunables::*field; unsigned min; };

constexpr DurationField kDurations[] = {
    {"slice_idle", &CfqTunables::slice_idle, 0ns},
    {"group_idle", &CfqTunables::group_idle, 0ns},
    {"slice_sync", &CfqTunables::slice_sync, 1ms},
    {"slice_async", &CfqTunables::slice_async, 1ms},
    {"fifo_expire_sync", &CfqTunables::fifo_expire_sync, 1ms},
    {"fifo_expire_async", &CfqTunables::fifo_expire_async, 1ms},
    {"target_latency", &CfqTunables::target_latency, 1ms},
};
constexpr CountField kCounts[] = {
    {"quantum", &CfqTunables::quantum, 1},
    {"slice_async_rq", &CfqTunables::slice_async_rq, 1},
    {"back_seek_penalty", &CfqTunables::back_seek_penalty, 1},
};

} // namespace

std::vector<std::string> tunable_names() {
    std::vector<std::string> names;
    for (const auto& f : kDurations) names.emplace_back(f.name);
    for (const auto& f : kCounts) names.emplace_back(f.name);
    names.emplace_back("back_seek_max");
    names.emplace_back("low_latency");
    return names;
}

CfqTunables default_tunables(const DeviceTraits& device) {
    CfqTunables t;
    t.slice_idle = auto_slice_idle(device);
    t.slice_idle_auto = true;
    return t;
}

std::string set_tunable(CfqTunables& t, const DeviceTraits& device, std::string_view name,
                        std::string_view value) {
    const std::string bad = "cfq: bad value '" + std::string(value) + "' for " + std::string(name);
    if (name == "slice_idle" && trim(value) == "auto") {
        t.slice_idle = auto_slice_idle(device);
        t.slice_idle_auto = true;
        return {};
    }
    for (const auto& f : kDurations) {
        if (f.name != name) continue;
        auto d = parse_duration(value);   // bare numbers are milliseconds, as in sysfs
        if (!d) return bad;
        t.*f.field = std::max(*d, f.min);
        if (name == "slice_idle") t.slice_idle_auto = false;
        return {};
    }
    for (const auto& f : kCounts) {
        if (f.name != name) continue;
        auto n = parse_count(value);
        if (!n) return bad;
        t.*f.field = std::max(*n, f.min);
        return {};
    }
    if (name == "back_seek_max") {
        auto n = parse_kib(value);
        if (!n) return bad;
        t.back_seek_max = *n;
        return {};
    }
    if (name == "low_latency") {
        auto b = parse_bool(value);
        if (!b) return bad;
        t.low_latency = *b;
        return {};
    }
    return "cfq: unknown tunable '" + std::string(name) + "'";
}

std::optional<std::string> get_tunable(const CfqTunables& t, std::string_view name) {
    for (const auto& f : kDurations)
        if (f.name == name) return format_duration(t.*f.field);
    for (const auto& f : kCounts)
        if (f.name == name) return std::to_string(t.*f.field);
    if (name == "back_seek_max") return std::to_string(t.back_seek_max);
    if (name == "low_latency") return std::string(t.low_latency ? "1" : "0");
    return std::nullopt;
}

} // namespace nbdsched::sched::cfq
