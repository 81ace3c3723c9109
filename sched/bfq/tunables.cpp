#include "sched/bfq/tunables.hpp"

#include <algorithm>
#include <charconv>

namespace nbdsched::sched::bfq {
namespace {

using namespace std::chrono_literals;

std::string_view strip(std::string_view s) {
    auto first = s.find_first_not_of(" \t");
    if (first == std::string_view::npos) return {};
    auto last = s.find_last_not_of(" \t");
    return s.substr(first, last - first + 1);
}

std::optional<std::uint64_t> number(std::string_view text) {
    std::uint64_t v = 0;
    auto end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return v;
}

std::optional<bool> flag(std::string_view text) {
    for (auto yes : {"1", "on", "true", "yes"})
        if (text == yes) return true;
    for (auto no : {"0", "off", "false", "no"})
        if (text == no) return false;
    return std::nullopt;
}

Nanos auto_slice_idle(const DeviceTraits& device) { return device.rotational ? 8ms : 0ns; }

// Durations: bare numbers are milliseconds like the sysfs files.
struct TimeKnob {
    std::string_view name;
    Nanos BfqTunables::*field;
    Nanos floor;
};
constexpr TimeKnob kTimeKnobs[] = {
    {"slice_idle", &BfqTunables::slice_idle, 0ns},
    {"group_idle", &BfqTunables::group_idle, 0ns},
    {"timeout_sync", &BfqTunables::timeout_sync, 1ms},   // kernel: at least 1 jiffy
    {"fifo_expire_sync", &BfqTunables::fifo_expire_sync, 1ms},
    {"fifo_expire_async", &BfqTunables::fifo_expire_async, 1ms},
};

std::string apply(BfqTunables& t, const DeviceTraits& device, std::string_view name,
                  std::string_view value) {
    if (name == "slice_idle" && value == "auto") {
        t.slice_idle = auto_slice_idle(device);
        t.slice_idle_auto = true;
        return {};
    }
    for (const auto& k : kTimeKnobs) {
        if (k.name != name) continue;
        auto d = parse_duration(value);
        if (!d) return "not a duration";
        t.*k.field = std::max(*d, k.floor);
        if (name == "slice_idle") t.slice_idle_auto = false;
        return {};
    }
    if (name == "strict_guarantees" || name == "low_latency") {
        auto b = flag(value);
        if (!b) return "expected 0 or 1";
        if (name == "low_latency") {
            t.low_latency = *b;
        } else {
            // bfq_strict_guarantees_store: turning it on raises slice_idle to
            // at least 8ms, since strict guarantees need real idling.
            if (*b && !t.strict_guarantees && t.slice_idle < 8ms) {
                t.slice_idle = 8ms;
                t.slice_idle_auto = false;
            }
            t.strict_guarantees = *b;
        }
        return {};
    }
    if (name == "max_budget") {   // sectors; 0 = auto (peak rate * timeout_sync)
        auto n = value == "auto" ? std::optional<std::uint64_t>(0) : number(value);
        if (!n) return "expected a number of sectors or auto";
        t.max_budget = std::min<std::uint64_t>(*n, 0x7fffffff);
        return {};
    }
    if (name == "back_seek_max") {   // KiB when bare, sizes accepted
        auto n = number(value);
        if (!n) {
            auto bytes = parse_size(value);
            if (!bytes) return "expected KiB or a size";
            n = *bytes / 1024;
        }
        t.back_seek_max = *n;
        return {};
    }
    if (name == "back_seek_penalty") {
        auto n = number(value);
        if (!n) return "expected a number";
        t.back_seek_penalty = unsigned(std::clamp<std::uint64_t>(*n, 1, 1u << 20));
        return {};
    }
    return "unknown tunable";
}

} // namespace

std::vector<std::string> tunable_names() {
    return {"slice_idle",   "group_idle",    "strict_guarantees", "low_latency",
            "timeout_sync", "max_budget",    "back_seek_max",     "back_seek_penalty",
            "fifo_expire_sync", "fifo_expire_async"};
}

BfqTunables default_tunables(const DeviceTraits& device) {
    BfqTunables t;
    t.slice_idle = auto_slice_idle(device);
    return t;
}

std::string set_tunable(BfqTunables& t, const DeviceTraits& device, std::string_view name,
                        std::string_view value) {
    BfqTunables next = t;
    std::string err = apply(next, device, name, strip(value));
    if (!err.empty())
        return "bfq: " + std::string(name) + "='" + std::string(value) + "': " + err;
    t = next;
    return {};
}

std::optional<std::string> get_tunable(const BfqTunables& t, std::string_view name) {
    for (const auto& k : kTimeKnobs)
        if (k.name == name) return format_duration(t.*k.field);
    if (name == "strict_guarantees") return std::string(t.strict_guarantees ? "1" : "0");
    if (name == "low_latency") return std::string(t.low_latency ? "1" : "0");
    if (name == "max_budget") return std::to_string(t.max_budget);
    if (name == "back_seek_max") return std::to_string(t.back_seek_max);
    if (name == "back_seek_penalty") return std::to_string(t.back_seek_penalty);
    return std::nullopt;
}

} // namespace nbdsched::sched::bfq
