#include "daemon/control/commands.hpp"

#include <spdlog/spdlog.h>

#include "backend/factory.hpp"
#include "common/json_text.hpp"
#include "daemon/control/qos.hpp"
#include "sched/tunable_spec.hpp"
#include "sched/weight.hpp"

namespace nbdsched::daemon::control {

namespace {

// A required string field, or an error message in `error`.
std::string field(const Json& request, const char* name, std::string& error) {
    auto it = request.find(name);
    if (it == request.end()) {
        if (error.empty()) error = std::string("missing \"") + name + "\"";
        return {};
    }
    if (it->is_string()) return it->get<std::string>();
    if (it->is_number()) return it->dump();   // "set d0 slice_idle 0" sent as a number
    if (error.empty()) error = std::string("\"") + name + "\" must be a string";
    return {};
}

Json with_ok(Json body) {
    Json out{{"ok", true}};
    for (auto& [k, v] : body.items()) out[k] = std::move(v);
    return out;
}

// The device the request names, or nullptr with the reason in `error`.
Device* requested_device(const Json& request, DaemonState& state, std::string& error) {
    auto name = field(request, "device", error);
    if (!error.empty()) return nullptr;
    Device* dev = state.find_device(name);
    if (!dev) error = "no device '" + name + "'";
    return dev;
}

Json tunable_command(const Json& request, DaemonState& state, bool set) {
    std::string error;
    Device* dev = requested_device(request, state, error);
    auto tunable = field(request, "tunable", error);
    auto value = set ? field(request, "value", error) : std::string();
    if (!error.empty()) return error_reply(error);
    const std::string& device = dev->name();
    auto& sched = dev->scheduler();
    if (set) {
        auto why = sched.set_tunable(tunable, value, steady_now());   // names the tunable
        if (!why.empty()) return error_reply("device " + device + ": " + why);
        dev->kick();   // a shorter slice_idle may end an idle wait now
        state.changed_by_ctl.tunables.emplace(device, tunable);
        spdlog::info("control: device {}: {} = {}", device, tunable, value);
    }
    auto now_value = sched.get_tunable(tunable);
    if (!now_value)
        return error_reply("device " + device + ": " +
                           sched::unknown_tunable_error(sched.policy(), sched::tunable_specs(sched.policy()), tunable));
    return Json{{"ok", true}, {"value", *now_value}};
}

// Reads, and with "enabled" switches, a device's fault injection. The
// switch lives in the device's FaultyBackend, so a reload that keeps the
// device (faults: unchanged) keeps it too.
Json faults_command(const Json& request, DaemonState& state) {
    std::string error;
    Device* dev = requested_device(request, state, error);
    if (!error.empty()) return error_reply(error);
    auto* faulty = backend::faulty_backend(dev->backend());
    if (!faulty) return error_reply("device " + dev->name() + " has no faults: rules");
    if (auto it = request.find("enabled"); it != request.end()) {
        if (!it->is_boolean()) return error_reply("\"enabled\" must be true or false");
        faulty->set_enabled(it->get<bool>());
        state.changed_by_ctl.faults.insert(dev->name());
        spdlog::info("control: device {}: faults {}", dev->name(), faulty->enabled() ? "on" : "off");
    }
    return with_ok(fault_switch_json(dev->name(), *faulty));
}

Json weight_command(const Json& request, DaemonState& state) {
    std::string error;
    auto group = field(request, "group", error);
    if (!error.empty()) return error_reply(error);
    auto it = request.find("weight");
    const std::string range = std::to_string(sched::min_weight) + ".." + std::to_string(sched::max_weight);
    if (it == request.end() || !it->is_number_integer())
        return error_reply("\"weight\" must be a whole number " + range);
    if (!it->is_number_unsigned())   // negative: read as such, not as a huge unsigned
        return error_reply("\"weight\": out of range: " + it->dump() + " (allowed " + range + ")");
    auto w = it->get<std::uint64_t>();
    if (auto why = sched::check_weight(w); !why.empty()) return error_reply("\"weight\": " + why);
    if (auto why = group_ctl_error(state, group); !why.empty()) return error_reply(why);
    // The next connection its cgroup rule places would set the cgroup's
    // weight again, and a restart would not carry this one: refused.
    if (auto id = state.groups->find(group); id && state.groups->at(*id).weight_from_cgroup)
        return error_reply("group " + group +
                           " takes its weight from its cgroup (weight: from-cgroup): set the cgroup's io.bfq.weight "
                           "or io.weight, or give the group a number in the configuration");
    auto why = apply_weight(state, group, static_cast<unsigned>(w));
    if (!why.empty()) return error_reply(why);
    state.changed_by_ctl.weights.insert(group);
    spdlog::info("control: group {} weight {}", group, w);
    return Json{{"ok", true}};
}

// Waits for the outcome a SIGHUP only logs: `systemctl reload` runs this, so
// a refused reload fails the job instead of reporting success.
Json reload_command(DaemonState& state) {
    if (!state.reload) return error_reply("this daemon does not reload");
    auto result = state.reload();
    if (!result.applied) {
        std::string why;
        for (const auto& m : result.messages) why += (why.empty() ? "" : "; ") + m;
        return error_reply("reload refused, the configuration in force stays: " + why);
    }
    return Json{{"ok", true}, {"messages", result.messages}};
}

}   // namespace

std::string apply_weight(DaemonState& state, const std::string& group, unsigned weight) {
    auto id = state.groups->find(group);
    if (!id) return "no group '" + group + "'";
    for (auto& dev : *state.devices) {
        dev->scheduler().set_group(*id, weight);
        dev->kick();
    }
    state.groups->set_weight(*id, weight);
    return {};
}

std::string group_ctl_error(const DaemonState& state, const std::string& group) {
    if (!state.groups->find(group)) return "no group '" + group + "'";
    if (!state.config->find_group(group))
        return "group " + group +
               " is not in the configuration in force: a reload left it out, it stays only for its open "
               "connections (add it to groups: and reload to change it)";
    return {};
}

namespace {

// The commands that read or change devices, run with every loop paused.
Json paused_command(const std::string& cmd, const Json& request, DaemonState& state) {
    if (cmd == "list") return with_ok(list_json(state));
    if (cmd == "get") return tunable_command(request, state, false);
    if (cmd == "set") return tunable_command(request, state, true);
    if (cmd == "weight") return weight_command(request, state);
    if (cmd == "faults") return faults_command(request, state);
    if (cmd == "reserve" || cmd == "limit" || cmd == "latency-target") return qos_command(request, state);
    return error_reply("unknown command '" + cmd + "' (list, stats, get, set, weight, faults, reserve, limit, latency-target, reload)");
}

}   // namespace

Json handle_command(const Json& request, DaemonState& state) {
    if (!request.is_object()) return error_reply("a request is a JSON object");
    auto it = request.find("cmd");
    if (it == request.end() || !it->is_string()) return error_reply("missing \"cmd\"");
    auto cmd = it->get<std::string>();
    // Only the copy of the numbers is paused: their JSON is built after.
    if (cmd == "stats") return with_ok(stats_json(take_snapshot(state)));
    if (cmd == "reload") return reload_command(state);   // the reload pauses the loops itself
    Json reply;
    state.exclusive([&] { reply = paused_command(cmd, request, state); });
    return reply;
}

std::string handle_line(const std::string& line, DaemonState& state) {
    Json reply;
    try {
        reply = handle_command(Json::parse(line), state);
    } catch (const Json::exception& e) {
        reply = error_reply(std::string("bad request: ") + e.what());
    }
    return json_text(reply) + "\n";
}

}   // namespace nbdsched::daemon::control
