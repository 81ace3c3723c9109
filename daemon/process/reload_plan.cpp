#include "daemon/process/reload_plan.hpp"

#include <algorithm>

namespace nbdsched::daemon {

namespace {

bool same_listen(const std::vector<config::Listen>& a, const std::vector<config::Listen>& b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i].kind != b[i].kind || a[i].path != b[i].path || a[i].host != b[i].host || a[i].port != b[i].port ||
            a[i].tls != b[i].tls || a[i].insecure != b[i].insecure ||
            a[i].mode != b[i].mode || a[i].owner != b[i].owner || a[i].group != b[i].group)
            return false;
    return true;
}

bool same_rule(const config::Rule& a, const config::Rule& b) {
    return a.cgroup == b.cgroup && a.uid == b.uid && a.gid == b.gid && a.address == b.address &&
           a.export_name == b.export_name && a.group == b.group;
}

// Every limit but stall_timeout (applied live by Server::reload) needs a
// restart. Compared whole, so a reload refuses a change to a field added to
// config::Limits until that field is applied live and set equal here too.
bool same_restart_limits(config::Limits a, const config::Limits& b) {
    a.stall_timeout = b.stall_timeout;
    return a == b;
}

// Which files and how clients are verified are fixed at start; what the
// files hold is read again by every reload (TlsContext::reload).
bool same_tls(const config::Tls& a, const config::Tls& b) {
    return a.psk_file == b.psk_file && a.certificates == b.certificates && a.verify_clients == b.verify_clients;
}

// Device fields that are baked into the running device.
void compare_device(const config::Device& a, const config::Device& b, ReloadPlan& plan) {
    auto refuse = [&](const std::string& what) {
        plan.refused.push_back(b.origin.str() + ": device " + b.name + ": " + what + " cannot change without a restart");
    };
    if (a.backend != b.backend) refuse("backend");
    if (a.size != b.size) refuse("size");
    if (a.path != b.path) refuse("path");
    if (a.direct != b.direct) refuse("direct");
    if (a.huge_pages != b.huge_pages) refuse("huge_pages");
    if (a.io_engine != b.io_engine) refuse("io_engine");
    if (a.io_cohorts != b.io_cohorts) refuse("io_cohorts");
    if (a.rotational != b.rotational) refuse("rotational");
    if (a.scheduler != b.scheduler) refuse("scheduler (" + a.scheduler + " -> " + b.scheduler + ")");
    if (a.profile != b.profile || a.profile_params != b.profile_params) refuse("profile");
    if (a.read_ahead_kb != b.read_ahead_kb || a.read_ahead_cache != b.read_ahead_cache) refuse("read-ahead");
    if (a.writes_sync != b.writes_sync) refuse("writes_sync");
    if (a.queue_depth != b.queue_depth) refuse("queue_depth");
    if (a.faults != b.faults) refuse("faults");
    const auto &x = a.rbd, &y = b.rbd;
    if (x.pool != y.pool || x.image != y.image || x.rados_namespace != y.rados_namespace || x.ceph_conf != y.ceph_conf ||
        x.client != y.client || x.osd_op_timeout != y.osd_op_timeout || x.mount_timeout != y.mount_timeout)
        refuse("rbd image or cluster settings");
    if (x.cache != y.cache) refuse("rbd_cache");
    sched::Tunables changed;
    for (const auto& [name, value] : b.tunables) {
        auto it = a.tunables.find(name);
        if (it == a.tunables.end() || it->second != value) {
            changed[name] = value;
            plan.notes.push_back("device " + b.name + ": " + name + " = " + value);
        }
    }
    for (const auto& [name, value] : a.tunables)
        if (!b.tunables.count(name))
            plan.notes.push_back("device " + b.name + ": " + name + " left out: keeps its current value " + value);
    if (!changed.empty()) plan.tunables.emplace_back(b.name, std::move(changed));
}

bool same_allow(const std::vector<config::AllowRule>& a, const std::vector<config::AllowRule>& b) {
    return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                      [](const config::AllowRule& x, const config::AllowRule& y) { return x.same_as(y); });
}

std::string effective_group(const config::Config& c, const config::Export& e) {
    if (!e.group.empty()) return e.group;
    const auto* d = c.find_device(e.device);
    return d ? d->default_group : "default";
}

void compare_exports(const config::Config& old, const config::Config& next, ReloadPlan& plan) {
    if (old.exports.size() != next.exports.size()) {
        plan.refused.push_back("exports added or removed: cannot change without a restart");
        return;
    }
    for (std::size_t i = 0; i < next.exports.size(); ++i) {
        const auto& a = old.exports[i];
        const auto& b = next.exports[i];
        if (a.name != b.name || a.device != b.device || a.offset != b.offset || a.size != b.size ||
            a.readonly != b.readonly) {
            plan.refused.push_back(b.origin.str() + ": export " + b.name +
                                   ": name, device, window or readonly cannot change without a restart");
            continue;
        }
        if (!same_allow(a.allow, b.allow)) {
            plan.export_allow.push_back(i);
            plan.notes.push_back("export " + b.name + ": allow: " +
                                 (b.allow.empty() ? std::string("everyone") : std::to_string(b.allow.size()) + " rule(s)") +
                                 " (new connections)");
        }
        auto ga = effective_group(old, a), gb = effective_group(next, b);
        if (ga != gb) {
            plan.export_groups.emplace_back(i, gb);
            plan.notes.push_back("export " + b.name + ": new connections go to group " + gb);
        }
    }
}

}   // namespace

ReloadPlan plan_reload(const config::Config& old, const config::Config& next) {
    ReloadPlan plan;
    if (!same_listen(old.listen, next.listen)) plan.refused.push_back("listen: cannot change without a restart");
    if (old.control != next.control) plan.refused.push_back("control: cannot change without a restart");
    if (old.metrics != next.metrics) plan.refused.push_back("metrics: cannot change without a restart");
    if (!same_restart_limits(old.limits, next.limits))
        plan.refused.push_back("limits: cannot change without a restart");
    if (old.limits.stall_timeout != next.limits.stall_timeout)
        plan.notes.push_back("limits.stall_timeout = " + format_duration(next.limits.stall_timeout) +
                             " (stalls under way are timed by it now)");
    if (!same_tls(old.tls, next.tls)) plan.refused.push_back("tls: cannot change without a restart");
    if (old.devices.size() != next.devices.size()) {
        plan.refused.push_back("devices added or removed: cannot change without a restart");
    } else {
        for (std::size_t i = 0; i < next.devices.size(); ++i) {
            if (old.devices[i].name != next.devices[i].name) {
                plan.refused.push_back("device " + old.devices[i].name + " renamed: cannot change without a restart");
                continue;
            }
            compare_device(old.devices[i], next.devices[i], plan);
        }
    }
    compare_exports(old, next, plan);
    for (const auto& g : next.groups) {
        const auto* was = old.find_group(g.name);
        const bool same_qos = was && was->qos == g.qos;
        if (was && was->weight == g.weight && was->weight_from_cgroup == g.weight_from_cgroup && same_qos) continue;
        plan.groups.push_back(g);
        // A group whose QoS alone changed says nothing of its weight: the
        // weight in force (perhaps ctl's) stays (reload.cpp).
        if (!was || was->weight != g.weight || was->weight_from_cgroup != g.weight_from_cgroup)
            plan.notes.push_back("group " + g.name + (was ? "" : " (new)") + ": weight " +
                                 (g.weight_from_cgroup ? std::string("from-cgroup") : std::to_string(g.weight)));
        if (!same_qos && (was || g.qos.any()))
            plan.notes.push_back("group " + g.name + ": reserve " + sched::qos::to_string(g.qos.reserve) + ", limit " +
                                 sched::qos::to_string(g.qos.limit) + ", latency target " +
                                 (g.qos.latency_target.count() ? format_duration(g.qos.latency_target) : "none"));
    }
    for (const auto& g : old.groups)
        if (!next.find_group(g.name)) plan.notes.push_back("group " + g.name + " left out: kept for open connections");
    plan.rules_changed = old.rules.size() != next.rules.size();
    for (std::size_t i = 0; !plan.rules_changed && i < next.rules.size(); ++i)
        plan.rules_changed = !same_rule(old.rules[i], next.rules[i]);
    if (plan.rules_changed) plan.notes.push_back("rules: " + std::to_string(next.rules.size()) + " (new connections)");
    if (old.log_level != next.log_level) plan.notes.push_back("log_level: " + next.log_level);
    return plan;
}

}   // namespace nbdsched::daemon
