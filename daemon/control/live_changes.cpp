#include "daemon/control/live_changes.hpp"

#include <spdlog/spdlog.h>

#include "backend/factory.hpp"
#include "common/units.hpp"
#include "daemon/control/commands.hpp"
#include "daemon/control/qos.hpp"

namespace nbdsched::daemon::control {

namespace {

std::optional<std::string> file_tunable(const config::Device& device, const std::string& name) {
    auto it = device.tunables.find(name);
    if (it == device.tunables.end()) return std::nullopt;
    return it->second;
}

void apply_weight_change(DaemonState& state, const LiveChanges::Weight& w) {
    const auto* group = state.config->find_group(w.group);
    if (!group || group->weight_from_cgroup) {
        spdlog::info("hand-over: ctl weight {} {} not kept: the group is not in this configuration's groups (or its "
                     "weight is from-cgroup)",
                     w.group, w.weight);
        return;
    }
    if (group->weight != w.file_weight) {
        spdlog::info("hand-over: ctl weight {} {} not kept: this configuration changes the group's weight ({} -> {})",
                     w.group, w.weight, w.file_weight, group->weight);
        return;
    }
    auto why = apply_weight(state, w.group, w.weight);
    if (!why.empty()) {
        spdlog::error("hand-over: ctl weight {} {} not kept: {}", w.group, w.weight, why);
        return;
    }
    state.changed_by_ctl.weights.insert(w.group);
    spdlog::info("hand-over: ctl weight {} {} kept", w.group, w.weight);
}

void apply_tunable_change(DaemonState& state, const LiveChanges::Tunable& t) {
    const auto* device = state.config->find_device(t.device);
    Device* dev = state.find_device(t.device);
    const auto what = t.device + " " + t.name + " " + t.value;
    if (!device || !dev || device->scheduler != t.policy) {
        spdlog::info("hand-over: ctl set {} not kept: the device is not in this configuration (or its scheduler is "
                     "not {} any more)",
                     what, t.policy);
        return;
    }
    if (file_tunable(*device, t.name) != t.file_value) {
        spdlog::info("hand-over: ctl set {} not kept: this configuration changes {}'s {}", what, t.device, t.name);
        return;
    }
    auto why = dev->scheduler().set_tunable(t.name, t.value, steady_now());
    if (!why.empty()) {
        spdlog::error("hand-over: ctl set {} not kept: {}", what, why);
        return;
    }
    dev->kick();
    state.changed_by_ctl.tunables.emplace(t.device, t.name);
    spdlog::info("hand-over: ctl set {} kept", what);
}

void apply_faults_change(DaemonState& state, const LiveChanges::Faults& f) {
    Device* dev = state.find_device(f.device);
    auto* faulty = dev ? backend::faulty_backend(dev->backend()) : nullptr;
    const char* onoff = f.enabled ? "on" : "off";
    if (!faulty) {
        spdlog::info("hand-over: ctl faults {} {} not kept: the device has no faults: rules in this configuration",
                     f.device, onoff);
        return;
    }
    faulty->set_enabled(f.enabled);
    state.changed_by_ctl.faults.insert(f.device);
    spdlog::info("hand-over: ctl faults {} {} kept", f.device, onoff);
}

// A check of the settings (sched::qos::check) failing here is a state
// from another version's rules: not applied, and said.
void apply_qos_change(DaemonState& state, const LiveChanges::Qos& q) {
    const auto* group = state.config->find_group(q.group);
    const auto what = q.group + " " + sched::qos::to_string(q.qos);
    if (!group) {
        spdlog::info("hand-over: ctl QoS of group {} not kept: the group is not in this configuration's groups", what);
        return;
    }
    if (group->qos != q.file_qos) {
        spdlog::info("hand-over: ctl QoS of group {} not kept: this configuration changes the group's reserve, limit "
                     "or latency_target (to {})",
                     what, sched::qos::to_string(group->qos));
        return;
    }
    std::vector<std::string> warnings;
    if (auto why = apply_qos(state, q.group, q.qos, warnings); !why.empty()) {
        spdlog::error("hand-over: ctl QoS of group {} not kept: {}", what, why);
        return;
    }
    for (const auto& w : warnings) spdlog::warn("hand-over: {}", w);
    state.changed_by_ctl.qos.insert(q.group);
    spdlog::info("hand-over: ctl QoS of group {} kept", what);
}

}   // namespace

LiveChanges live_changes(const DaemonState& state) {
    LiveChanges changes;
    for (const auto& name : state.changed_by_ctl.weights) {
        const auto* group = state.config->find_group(name);
        auto id = state.groups->find(name);
        if (group && id) changes.weights.push_back({name, state.groups->at(*id).weight, group->weight});
    }
    for (const auto& [device_name, tunable] : state.changed_by_ctl.tunables) {
        const auto* device = state.config->find_device(device_name);
        Device* dev = state.find_device(device_name);
        if (!device || !dev) continue;
        auto value = dev->scheduler().get_tunable(tunable);
        if (value)
            changes.tunables.push_back({device_name, std::string(dev->scheduler().policy()), tunable, *value,
                                        file_tunable(*device, tunable)});
    }
    for (const auto& name : state.changed_by_ctl.faults) {
        Device* dev = state.find_device(name);
        if (auto* faulty = dev ? backend::faulty_backend(dev->backend()) : nullptr)
            changes.faults.push_back({name, faulty->enabled()});
    }
    for (const auto& name : state.changed_by_ctl.qos) {
        const auto* group = state.config->find_group(name);
        auto id = state.groups->find(name);
        if (group && id) changes.qos.push_back({name, state.groups->at(*id).qos, group->qos});
    }
    return changes;
}

void apply_live_changes(DaemonState& state, const LiveChanges& changes) {
    for (const auto& w : changes.weights) apply_weight_change(state, w);
    for (const auto& t : changes.tunables) apply_tunable_change(state, t);
    for (const auto& f : changes.faults) apply_faults_change(state, f);
    for (const auto& q : changes.qos) apply_qos_change(state, q);
}

}   // namespace nbdsched::daemon::control
