#include "daemon/process/reload.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>
#include <system_error>

#include "common/units.hpp"
#include "daemon/control/qos.hpp"
#include "daemon/process/systemd_notify.hpp"

namespace nbdsched::daemon {

namespace {

// RELOADING=1 now, READY=1 when the scope ends, whatever the outcome.
struct NotifyReload {
    std::string status = "reload failed: the previous configuration stays in force";
    NotifyReload() { notify_reloading(); }
    ~NotifyReload() { notify_ready(status); }
};

// Export windows against their devices' sizes now.
void fit_exports(control::DaemonState& state) {
    const auto& exports = state.config->exports;
    for (std::size_t i = 0; i < exports.size() && i < state.exports->infos.size(); ++i) {
        auto& info = state.exports->infos[i];
        const auto& binding = state.exports->bindings[i];
        const std::uint64_t end = binding.device->size();
        const std::uint64_t room = end > binding.offset ? end - binding.offset : 0;
        const std::uint64_t size = std::min(exports[i].size.value_or(room), room);
        if (size == info.size) continue;
        if (exports[i].size && size < *exports[i].size)
            spdlog::warn("reload: export {}: its window ends past its device's end now: {} served", info.name,
                         format_size(size));
        info.size = size;
    }
}

// Runs with every loop paused (exclusive), so the device's read-ahead can
// forget what it read before the change.
void report_size(Device& dev, std::uint64_t before, int err) {
    if (err != 0) {
        spdlog::error("reload: device {}: cannot read its size again ({}); it stays {}", dev.name(),
                      std::system_category().message(err), format_size(before));
    } else if (dev.size() != before) {
        spdlog::info("reload: device {}: size {} -> {} (new connections)", dev.name(), format_size(before),
                     format_size(dev.size()));
        dev.size_changed();
    }
}

// A tunable's note as the scheduler holds it, once applied: a value the
// policy clamped (cfq's quantum 0 is 1) or wrote its own way (0.5 is 500us)
// says so, rather than repeating the file's text as if it were in force.
void note_tunables_in_force(control::DaemonState& state, ReloadPlan& plan) {
    for (const auto& [device, tunables] : plan.tunables) {
        Device* dev = state.find_device(device);
        if (!dev) continue;
        for (const auto& [name, value] : tunables) {
            const auto in_force = dev->scheduler().get_tunable(name);
            if (!in_force || *in_force == value) continue;
            const std::string written = "device " + device + ": " + name + " = " + value;
            for (auto& note : plan.notes)
                if (note == written) note = "device " + device + ": " + name + " = " + *in_force + " (written " + value + ")";
        }
    }
}

// Each group's reserve/limit/latency_target from `next`, except where `ctl
// reserve|limit|latency-target` changed the group's and `next` gives the
// same settings as the file in force: those are kept, as a ctl weight is.
// (Before, every reload put the file's back and said nothing: a limit set
// with ctl on a noisy tenant vanished on a reload for another group.)
// Returns what it kept or replaced of ctl's, one line each, also logged.
std::vector<std::string> apply_group_qos(control::DaemonState& state, const config::Config& next) {
    std::vector<std::string> said, warnings;
    for (const auto& g : next.groups) {
        auto id = state.groups->find(g.name);
        if (!id) continue;
        const auto live = state.groups->at(*id).qos;
        const bool by_ctl = state.changed_by_ctl.qos.count(g.name) > 0;
        const auto* was = state.config->find_group(g.name);
        const bool file_changed = !was || was->qos != g.qos;
        if (live == g.qos) {
            state.changed_by_ctl.qos.erase(g.name);
            continue;
        }
        if (by_ctl && !file_changed) {
            said.push_back("group " + g.name + ": " + sched::qos::to_string(live) +
                           ", set with ctl, kept: the file does not change the group's reserve, limit or "
                           "latency_target");
            spdlog::info("reload: {}", said.back());
            continue;
        }
        auto why = control::apply_qos(state, g.name, g.qos, warnings);   // checked when loaded
        if (!why.empty()) {
            spdlog::error("reload: {}", why);
            continue;
        }
        state.changed_by_ctl.qos.erase(g.name);
        if (!by_ctl) continue;
        said.push_back("group " + g.name + ": " + sched::qos::to_string(live) +
                       ", set with ctl, not kept: the file changes the group's to " + sched::qos::to_string(g.qos));
        spdlog::info("reload: {}", said.back());
    }
    std::sort(warnings.begin(), warnings.end());
    warnings.erase(std::unique(warnings.begin(), warnings.end()), warnings.end());
    for (const auto& w : warnings) spdlog::warn("reload: {}", w);
    return said;
}

// The weight a group the plan changes gets: the one its cgroup gave it
// (from-cgroup), ctl's where `ctl weight` set it and the file keeps the
// group's weight (its reserve, limit or latency_target alone changed), the
// file's otherwise. Before, a reload that changed only a group's QoS put
// the file's weight back over ctl's without a word. Adds a line to `said`
// (also logged) for each ctl weight kept or not kept.
unsigned group_weight_after_reload(control::DaemonState& state, const config::Group& g,
                                   std::vector<std::string>& said) {
    auto existing = state.groups->find(g.name);
    if (!existing) return g.weight;
    const unsigned live = state.groups->at(*existing).weight;
    if (g.weight_from_cgroup) {
        state.changed_by_ctl.weights.erase(g.name);   // its cgroup's weight holds
        return live;
    }
    if (state.changed_by_ctl.weights.count(g.name) == 0) return g.weight;
    const auto* was = state.config->find_group(g.name);
    if (was && was->weight == g.weight && !was->weight_from_cgroup) {
        said.push_back("group " + g.name + ": weight " + std::to_string(live) +
                       ", set with ctl, kept: the file does not change the group's weight");
        spdlog::info("reload: {}", said.back());
        return live;
    }
    state.changed_by_ctl.weights.erase(g.name);   // the file changed this group's weight: its value holds
    if (live != g.weight) {
        said.push_back("group " + g.name + ": weight " + std::to_string(live) +
                       ", set with ctl, not kept: the file changes the group's to " + std::to_string(g.weight));
        spdlog::info("reload: {}", said.back());
    }
    return g.weight;
}

}   // namespace

std::vector<std::string> apply_plan(control::DaemonState& state, const ReloadPlan& plan, config::Config next) {
    auto now = steady_now();
    std::vector<std::string> said;
    for (const auto& g : plan.groups) {
        auto existing = state.groups->find(g.name);
        const unsigned weight = group_weight_after_reload(state, g, said);
        config::Group entry = g;
        entry.weight = weight;
        // The QoS in force stays for apply_group_qos(), which decides and
        // applies it on the devices too (taking the file's here changed the
        // table only, so a reload's new limit never reached the devices).
        entry.qos = existing ? state.groups->at(*existing).qos : sched::qos::GroupQos{};
        auto id = state.groups->upsert(entry);
        for (auto& dev : *state.devices) {
            dev->scheduler().set_group(id, weight);
            dev->kick();
        }
    }
    auto qos_said = apply_group_qos(state, next);
    said.insert(said.end(), qos_said.begin(), qos_said.end());
    for (const auto& [device, tunables] : plan.tunables) {
        Device* dev = state.find_device(device);
        if (!dev) continue;
        for (const auto& [name, value] : tunables) {
            state.changed_by_ctl.tunables.erase({device, name});
            auto why = dev->scheduler().set_tunable(name, value, now);
            if (!why.empty()) spdlog::error("reload: device {}: {} = {}: {}", device, name, value, why);
        }
        dev->kick();
    }
    for (const auto& [index, group] : plan.export_groups) {
        auto id = state.groups->find(group);
        if (id && index < state.exports->bindings.size()) state.exports->bindings[index].group = *id;
    }
    for (std::size_t i = 0; i < next.exports.size() && i < state.exports->infos.size(); ++i)
        state.exports->infos[i].description = next.exports[i].description;
    for (auto i : plan.export_allow)
        if (i < state.exports->bindings.size()) state.exports->bindings[i].allow = next.exports[i].allow;
    if (next.log_level != state.config->log_level) spdlog::set_level(spdlog::level::from_str(next.log_level));
    *state.config = std::move(next);
    fit_exports(state);   // a window the new config changed
    return said;
}

void SizeRefresh::start() {
    state_.exclusive([&] {
        for (auto& owned : *state_.devices) {
            Device* dev = owned.get();
            const std::uint64_t before = dev->size();
            if (!dev->backend().blocking()) {   // RAM: nothing to wait for
                report_size(*dev, before, dev->backend().refresh_size());
                continue;
            }
            if (!reading_.insert(dev).second) {
                spdlog::warn("reload: device {}: its size is still being read since an earlier reload (storage "
                             "not answering?); it stays {}",
                             dev->name(), format_size(before));
                continue;
            }
            {
                std::lock_guard lock(in_pool_mutex_);
                in_pool_.insert(dev->name());
            }
            // Beside the device's requests: blocking backends keep their size atomic (backend.hpp).
            boost::asio::post(pool_, [this, dev, before] {
                const int err = dev->backend().refresh_size();
                {
                    std::lock_guard lock(in_pool_mutex_);
                    in_pool_.erase(dev->name());
                }
                boost::asio::post(loop0_, [this, dev, before, err] { finish(dev, before, err); });
            });
        }
        fit_exports(state_);
    });
}

std::vector<std::string> SizeRefresh::reading() const {
    std::lock_guard lock(in_pool_mutex_);
    return {in_pool_.begin(), in_pool_.end()};
}

void SizeRefresh::finish(Device* dev, std::uint64_t before, int err) {
    reading_.erase(dev);
    state_.exclusive([&] {
        report_size(*dev, before, err);
        fit_exports(state_);
    });
}

control::ReloadResult reload_config(control::DaemonState& state, const ConfigAdjust& adjust, TlsContext* tls) {
    NotifyReload notify;
    control::ReloadResult result;
    const std::string path = state.config->source;
    if (path.empty() || path.front() == '<') {
        result.messages.push_back("running on " + path + ": no file to reload");
        spdlog::warn("SIGHUP: {}", result.messages.back());
        return result;
    }
    spdlog::info("SIGHUP: reloading {}", path);
    auto loaded = config::load_file(path);
    if (!loaded.config) {
        for (const auto& e : loaded.errors) {
            result.messages.push_back(e.str());
            spdlog::error("reload: {}", e.str());
        }
        spdlog::error("reload: {} has {} error(s); keeping the configuration in force", path, loaded.errors.size());
        return result;
    }
    std::string error;
    if (adjust && !adjust(*loaded.config, error)) {
        result.messages.push_back(error);
        spdlog::error("reload: {}; keeping the configuration in force", error);
        return result;
    }
    auto plan = plan_reload(*state.config, *loaded.config);
    if (!plan.ok()) {
        for (const auto& why : plan.refused) spdlog::error("reload: {}", why);
        spdlog::error("reload refused; keeping the configuration in force");
        result.messages = plan.refused;
        return result;
    }
    // The files behind tls: (the same paths: the plan refused others) may
    // have changed: a revoked key or a renewed certificate. The last check
    // that may refuse, so nothing is half applied.
    std::string tls_note;
    if (tls && !tls->reload(loaded.config->tls, tls_note, error)) {
        result.messages.push_back("tls: " + error);
        spdlog::error("reload: tls: {}; keeping the configuration and the TLS credentials in force", error);
        return result;
    }
    if (!tls_note.empty()) plan.notes.push_back(tls_note);
    auto ctl_kept = apply_plan(state, plan, std::move(*loaded.config));
    note_tunables_in_force(state, plan);
    for (const auto& note : plan.notes) spdlog::info("reload: {}", note);
    spdlog::info("reload: done ({} change(s))", plan.notes.size());
    notify.status = "configuration reloaded";
    result.applied = true;
    result.messages = std::move(plan.notes);
    result.messages.insert(result.messages.end(), ctl_kept.begin(), ctl_kept.end());
    return result;
}

}   // namespace nbdsched::daemon
