#include "daemon/control/report.hpp"

#include <chrono>

#include "backend/factory.hpp"
#include "daemon/control/qos.hpp"
#include "daemon/stats/catalog.hpp"

namespace nbdsched::daemon::control {

namespace {

// Durations in the unit their key names (µs, ms), counts and bytes exact.
void put(Json& j, const stats::Stat& stat, std::uint64_t raw) {
    if (stats::is_duration(stat.unit))
        j[std::string(stat.key)] = stats::in_unit(stat.unit, raw);
    else
        j[std::string(stat.key)] = raw;
}

Json queue_info_json(sched::QueueId id, const stats::QueueInfo& info, const GroupTable& groups) {
    Json j;
    j["id"] = id;
    j["export"] = info.export_name;
    j["group"] = groups.name_of(info.group);
    j["peer"] = info.peer;
    return j;
}

// The device-wide in-flight limits: what is held now, the
// high-water marks, and how often a connection had to wait for room.
Json inflight_json(const InflightBudget::Stats& s, const config::Limits& limits) {
    Json j;
    j["requests"] = s.requests;
    j["bytes"] = s.bytes;
    j["peak_requests"] = s.peak_requests;
    j["peak_bytes"] = s.peak_bytes;
    j["waits"] = s.waits;
    j["tickets"] = s.tickets;
    j["max_requests"] = limits.max_inflight_per_device;
    j["max_bytes"] = limits.max_inflight_bytes_per_device;
    return j;
}

// What the device's `faults:` rules injected, per operation.
Json faults_json(const backend::FaultStats& s) {
    Json j;
    j["errors"] = s.total_errors();
    for (unsigned i = 0; i < fault_op_count; ++i)
        j[std::string(fault_op_name(1u << i)) + "_errors"] = s.errors[i];
    j["enospc"] = s.enospc;
    j["delayed"] = s.delayed;
    return j;
}

}   // namespace

Device* DaemonState::find_device(std::string_view name) const {
    for (auto& d : *devices)
        if (d->name() == name) return d.get();
    return nullptr;
}

Json error_reply(const std::string& message) {
    return Json{{"ok", false}, {"error", message}};
}

Json counters_json(const stats::Counters& c) {
    Json j;
    for (const auto& stat : stats::catalog())
        if (!stat.key.empty() && !stat.from_sched()) put(j, stat, stat.counters(c));
    return j;
}

Json sched_json(const sched::EntityStats& s) {
    Json j;
    for (const auto& stat : stats::catalog())
        if (!stat.key.empty() && stat.from_sched()) put(j, stat, stat.sched(s));
    return j;
}

Json list_json(const DaemonState& state) {
    Json out;
    out["groups"] = Json::array();
    for (std::size_t i = 0; i < state.groups->size(); ++i) {
        const auto& g = state.groups->entries()[i];
        Json entry{{"name", g.name}, {"weight", g.weight}, {"from_cgroup", g.weight_from_cgroup}};
        if (g.qos.any()) {
            entry["qos"] = qos_json(g.qos, {});
            entry["qos"].erase("stats");
        }
        out["groups"].push_back(std::move(entry));
    }
    out["devices"] = Json::array();
    for (auto& dev : *state.devices) {
        Json d;
        d["name"] = dev->name();
        d["scheduler"] = std::string(dev->scheduler().policy());
        d["size"] = dev->size();
        d["rotational"] = dev->rotational();
        d["backend"] = dev->backend().describe();
        d["io_engine"] = std::string(dev->io_engine());
        d["tunables"] = Json::object();   // name -> value as `ctl get` prints it
        for (const auto& n : dev->scheduler().tunable_names())
            d["tunables"][n] = dev->scheduler().get_tunable(n).value_or("");
        d["exports"] = Json::array();
        for (std::size_t i = 0; i < state.exports->bindings.size(); ++i) {
            const auto& b = state.exports->bindings[i];
            if (b.device != dev.get()) continue;
            d["exports"].push_back({{"name", state.exports->infos[i].name},
                                    {"offset", b.offset},
                                    {"size", state.exports->infos[i].size},
                                    {"group", state.groups->name_of(b.group)},
                                    {"read_only", b.read_only}});
        }
        d["queues"] = Json::array();
        for (const auto& [id, q] : dev->stats().queues()) d["queues"].push_back(queue_info_json(id, q.info, *state.groups));
        out["devices"].push_back(std::move(d));
    }
    return out;
}

Json stats_json(const DaemonState& state) {
    Json out;
    out["devices"] = Json::array();
    auto now = steady_now();
    for (auto& dev : *state.devices) {
        const auto& st = dev->stats();
        auto ss = dev->scheduler().stats(now);
        Json d;
        d["name"] = dev->name();
        d["scheduler"] = std::string(dev->scheduler().policy());
        d["hw_tag"] = ss.hw_tag;
        d["idling"] = ss.idling;
        d["lock_lost"] = state.lock_lost(dev->name());
        d["counters"] = counters_json(st.device());
        d["sched"] = sched_json(ss.device);
        d["inflight"] = inflight_json(dev->inflight_budget().stats(), state.config->limits);
        if (auto f = backend::fault_stats(dev->backend())) d["faults"] = faults_json(*f);
        if (auto m = dev->backend().memory_bytes()) d["memory_bytes"] = *m;
        d["queues_opened"] = st.queues_opened();
        d["exports"] = Json::array();
        for (const auto& [name, c] : st.exports()) {
            Json e = counters_json(c);
            e["name"] = name;
            d["exports"].push_back(std::move(e));
        }
        d["groups"] = Json::array();
        for (std::size_t id = 0; id < state.groups->size(); ++id) {
            auto gid = static_cast<sched::GroupId>(id);
            Json g;
            g["name"] = state.groups->name_of(gid);
            g["weight"] = state.groups->at(gid).weight;
            auto c = st.groups().find(gid);
            g["counters"] = counters_json(c == st.groups().end() ? stats::Counters{} : c->second);
            auto s = ss.groups.find(gid);
            g["sched"] = sched_json(s == ss.groups.end() ? sched::EntityStats{} : s->second);
            if (auto q = ss.qos.find(gid); q != ss.qos.end()) g["qos"] = qos_json(state.groups->at(gid).qos, q->second);
            d["groups"].push_back(std::move(g));
        }
        d["queues"] = Json::array();
        for (const auto& [id, q] : st.queues()) {
            Json j = queue_info_json(id, q.info, *state.groups);
            j["counters"] = counters_json(q.counters);
            auto s = ss.queues.find(id);
            j["sched"] = sched_json(s == ss.queues.end() ? sched::EntityStats{} : s->second);
            d["queues"].push_back(std::move(j));
        }
        out["devices"].push_back(std::move(d));
    }
    return out;
}

Json fault_switch_json(const std::string& device, const backend::FaultyBackend& faulty) {
    Json j;
    j["device"] = device;
    j["enabled"] = faulty.enabled();
    j["rules"] = faulty.rule_count();
    j["faults"] = faults_json(faulty.stats());
    return j;
}

}   // namespace nbdsched::daemon::control
