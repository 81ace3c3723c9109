#include "daemon/control/commands.hpp"

#include <spdlog/spdlog.h>

namespace nbdsched::daemon::control {

namespace {

Json fail(const std::string& message) {
    return Json{{"ok", false}, {"error", message}};
}

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

Json tunable_command(const Json& request, DaemonState& state, bool set) {
    std::string error;
    auto device = field(request, "device", error);
    auto tunable = field(request, "tunable", error);
    auto value = set ? field(request, "value", error) : std::string();
    if (!error.empty()) return fail(error);
    Device* dev = state.find_device(device);
    if (!dev) return fail("no device '" + device + "'");
    auto& sched = dev->scheduler();
    if (set) {
        auto why = sched.set_tunable(tunable, value, steady_now());
        if (!why.empty()) return fail("device " + device + ": " + tunable + ": " + why);
        dev->kick();   // a shorter slice_idle may end an idle wait now
        spdlog::info("control: device {}: {} = {}", device, tunable, value);
    }
    auto now_value = sched.get_tunable(tunable);
    if (!now_value) {
        std::string names;
        for (const auto& n : sched.tunable_names()) names += (names.empty() ? "" : ", ") + n;
        return fail("device " + device + " (" + std::string(sched.policy()) + "): no tunable '" + tunable +
                    "'; it has: " + (names.empty() ? "none" : names));
    }
    return Json{{"ok", true}, {"value", *now_value}};
}

Json weight_command(const Json& request, DaemonState& state) {
    std::string error;
    auto group = field(request, "group", error);
    if (!error.empty()) return fail(error);
    auto it = request.find("weight");
    if (it == request.end() || !it->is_number_integer()) return fail("\"weight\" must be an integer 1..1000");
    auto w = it->get<long long>();
    if (w < 1 || w > 1000) return fail("weight " + std::to_string(w) + " is outside 1..1000");
    auto why = apply_weight(state, group, static_cast<unsigned>(w));
    if (!why.empty()) return fail(why);
    spdlog::info("control: group {} weight {}", group, w);
    return Json{{"ok", true}};
}

Json with_ok(Json body) {
    Json out{{"ok", true}};
    for (auto& [k, v] : body.items()) out[k] = std::move(v);
    return out;
}

} // namespace

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

Json handle_command(const Json& request, DaemonState& state) {
    if (!request.is_object()) return fail("a request is a JSON object");
    auto it = request.find("cmd");
    if (it == request.end() || !it->is_string()) return fail("missing \"cmd\"");
    auto cmd = it->get<std::string>();
    if (cmd == "list") return with_ok(list_json(state));
    if (cmd == "stats") return with_ok(stats_json(state));
    if (cmd == "get") return tunable_command(request, state, false);
    if (cmd == "set") return tunable_command(request, state, true);
    if (cmd == "weight") return weight_command(request, state);
    return fail("unknown command '" + cmd + "' (list, stats, get, set, weight)");
}

std::string handle_line(const std::string& line, DaemonState& state) {
    Json reply;
    try {
        reply = handle_command(Json::parse(line), state);
    } catch (const Json::exception& e) {
        reply = fail(std::string("bad request: ") + e.what());
    }
    return reply.dump() + "\n";
}

} // namespace nbdsched::daemon::control
