#include "daemon/control/qos.hpp"

#include <cmath>
#include <cstdio>
#include <optional>
#include <spdlog/spdlog.h>

#include "daemon/control/commands.hpp"
#include "sched/qos/qos_scheduler.hpp"

namespace nbdsched::daemon::control {

namespace {

double ms(Nanos d) { return std::chrono::duration<double, std::milli>(d).count(); }

// One excess line, or nothing.
void excess(std::vector<std::string>& out, const Device& dev, const char* what, double sum, double capacity,
            bool bytes) {
    if (capacity <= 0 || sum <= capacity) return;
    auto show = [&](double v) {
        if (!bytes) return std::to_string(std::llround(v)) + " IOPS";
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1fMiB/s", v / double(1 << 20));
        return std::string(buf);
    };
    out.push_back("device " + dev.name() + ": " + what + " reservations add up to " + show(sum) + ", " +
                  show(sum - capacity) + " (" + std::to_string(std::llround((sum - capacity) * 100 / capacity)) +
                  "%) above the " + show(capacity) + " its timing profile serves; they cannot all be met");
}

// A rate out of the request: a count, or a size with units for "bps"; in the
// configuration's range (sched/qos/spec.hpp), so 0 is refused: a key left
// out (`off`) is what clears.
std::string read_rate(const Json& request, const char* key, bool size, std::uint64_t& out) {
    auto it = request.find(key);
    if (it == request.end()) return {};
    std::optional<std::uint64_t> value;
    if (it->is_number_unsigned() || (it->is_number_integer() && it->get<long long>() >= 0))
        value = it->get<std::uint64_t>();
    else if (size && it->is_string())
        value = parse_size(it->get<std::string>());
    if (!value) return std::string("\"") + key + "\" must be " + (size ? "a size such as 20MiB" : "a count");
    auto why = size ? sched::qos::check_bps(*value) : sched::qos::check_iops(*value);
    if (!why.empty()) return std::string("\"") + key + "\": " + why;
    out = *value;
    return {};
}

// A duration out of the request, in `range`; "off" (where `off_clears`) is 0.
std::string read_duration(const Json& request, const char* key, const sched::qos::DurationRange& range,
                          bool off_clears, Nanos& out) {
    auto it = request.find(key);
    if (it == request.end()) return {};
    if (!it->is_string()) return std::string("\"") + key + "\" must be a duration such as " + range.example;
    const std::string text = it->get<std::string>();
    if (off_clears && text == "off") {
        out = Nanos(0);
        return {};
    }
    auto d = parse_duration(text);
    auto why = sched::qos::check_duration(range, d, text);
    if (!why.empty()) return std::string("\"") + key + "\": " + why + (off_clears ? " (or off)" : "");
    out = *d;
    return {};
}

}   // namespace

std::vector<std::string> qos_warnings(const Device& device, const GroupTable& groups) {
    double iops = 0, bps = 0;
    for (const auto& g : groups.entries()) {
        iops += double(g.qos.reserve.iops);
        bps += double(g.qos.reserve.bps);
    }
    std::vector<std::string> out;
    excess(out, device, "IOPS", iops, device.capacity().iops, false);
    excess(out, device, "byte", bps, device.capacity().bps, true);
    return out;
}

std::string apply_qos(DaemonState& state, const std::string& group, const sched::qos::GroupQos& qos,
                      std::vector<std::string>& warnings) {
    auto id = state.groups->find(group);
    if (!id) return "no group '" + group + "'";
    if (auto why = sched::qos::check(qos); !why.empty()) return "group " + group + ": " + why;
    auto now = steady_now();
    for (auto& dev : *state.devices) {
        auto* layer = sched::qos::qos_layer(dev->scheduler());
        if (!layer) continue;
        auto why = layer->set_qos(*id, qos, now);
        if (!why.empty()) return "device " + dev->name() + ": " + why;   // unreachable: checked above
        dev->kick();
    }
    state.groups->set_qos(*id, qos);
    for (auto& dev : *state.devices)
        for (auto& w : qos_warnings(*dev, *state.groups)) warnings.push_back(std::move(w));
    return {};
}

Json qos_command(const Json& request, DaemonState& state) {
    auto g = request.find("group");
    if (g == request.end() || !g->is_string()) return error_reply("missing \"group\"");
    const std::string group = g->get<std::string>();
    if (auto why = group_ctl_error(state, group); !why.empty()) return error_reply(why);
    auto id = state.groups->find(group);
    const std::string cmd = request.value("cmd", std::string());
    sched::qos::GroupQos qos = state.groups->at(*id).qos;
    std::string error;
    if (cmd == "reserve" || cmd == "limit") {
        sched::qos::Rate& rate = cmd == "reserve" ? qos.reserve : qos.limit;
        rate = {};
        for (auto why : {read_rate(request, "iops", false, rate.iops), read_rate(request, "bps", true, rate.bps)})
            if (error.empty()) error = why;
        if (cmd == "limit") {
            qos.burst = sched::qos::default_burst;
            if (error.empty()) error = read_duration(request, "burst", sched::qos::burst_range, false, qos.burst);
            // A burst alone would clear the limit (no rate): the file refuses it, so does ctl.
            if (error.empty() && request.contains("burst") && !rate.set())
                error = "limit: needs iops=, bps= or both (a burst alone is no limit; off removes it)";
        }
    } else {
        error = request.contains("target")
                    ? read_duration(request, "target", sched::qos::latency_target_range, true, qos.latency_target)
                    : "missing \"target\" (a duration, or off)";
    }
    if (!error.empty()) return error_reply(error);
    std::vector<std::string> warnings;
    if (auto why = apply_qos(state, group, qos, warnings); !why.empty()) return error_reply(why);
    state.changed_by_ctl.qos.insert(group);
    spdlog::info("control: group {}: reserve {}, limit {} (burst {}), latency target {}", group,
                 sched::qos::to_string(qos.reserve), sched::qos::to_string(qos.limit), format_duration(qos.burst),
                 qos.latency_target.count() ? format_duration(qos.latency_target) : std::string("none"));
    for (const auto& w : warnings) spdlog::warn("control: {}", w);
    Json out{{"ok", true}, {"warnings", warnings}};
    out["qos"] = qos_json(qos, {});
    out["qos"].erase("stats");
    return out;
}

Json qos_json(const sched::qos::GroupQos& q, const sched::QosGroupStats& s) {
    Json j;
    j["reserve"] = {{"iops", q.reserve.iops}, {"bps", q.reserve.bps}};
    j["limit"] = {{"iops", q.limit.iops}, {"bps", q.limit.bps}, {"burst_ms", ms(q.burst)}};
    j["latency_target_ms"] = ms(q.latency_target);
    j["stats"] = {{"throttled_ms", ms(s.throttled_time)},
                  {"limit_delayed", s.limit_delayed},
                  {"below_reservation_ms", ms(s.below_reservation)},
                  {"reserved_dispatches", s.reserved_dispatches},
                  {"latency_windows", s.latency_windows},
                  {"latency_misses", s.latency_misses},
                  {"last_p90_ms", ms(s.last_p90)},
                  {"depth_cap", s.depth_cap}};
    return j;
}

}   // namespace nbdsched::daemon::control
