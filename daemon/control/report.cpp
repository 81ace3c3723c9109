#include "daemon/control/report.hpp"

#include <chrono>
#include <cstring>

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
Json inflight_json(const InflightBudget::Stats& s, std::uint64_t max_requests, std::uint64_t max_bytes) {
    Json j;
    j["requests"] = s.requests;
    j["bytes"] = s.bytes;
    j["peak_requests"] = s.peak_requests;
    j["peak_bytes"] = s.peak_bytes;
    j["waits"] = s.waits;
    j["tickets"] = s.tickets;
    j["max_requests"] = max_requests;
    j["max_bytes"] = max_bytes;
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

// What the io_uring engine does with cohorts (docs/file-backend-io.md).
Json cohorts_json(const backend::CohortStats& s) {
    Json j;
    j["passes"] = s.passes;
    j["on"] = s.on;
    j["trials"] = s.trials;
    j["held_off"] = s.held_off;
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

Json counters_json(const Numbers& n) {
    Json j;
    const auto catalog = stats::catalog();
    for (std::size_t i = 0; i < catalog.size(); ++i)
        if (!catalog[i].key.empty() && !catalog[i].from_sched()) put(j, catalog[i], n[i]);
    return j;
}

Json sched_json(const Numbers& n) {
    Json j;
    const auto catalog = stats::catalog();
    for (std::size_t i = 0; i < catalog.size(); ++i)
        if (!catalog[i].key.empty() && catalog[i].from_sched()) put(j, catalog[i], n[i]);
    return j;
}

Json counters_json(const stats::Counters& c) {
    return counters_json(numbers_of(&c, nullptr));
}

Json sched_json(const sched::EntityStats& s) {
    return sched_json(numbers_of(nullptr, &s));
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

Json stats_json(const StatsSnapshot& snapshot) {
    Json out;
    out["devices"] = Json::array();
    for (const auto& dev : snapshot.devices) {
        Json d;
        d["name"] = dev.name;
        d["scheduler"] = dev.scheduler;
        d["hw_tag"] = dev.hw_tag;
        d["idling"] = dev.idling;
        d["lock_lost"] = dev.lock_lost;
        // null while the storage has persisted everything asked of it
        d["storage_error"] = dev.storage_error ? Json(std::strerror(dev.storage_error)) : Json(nullptr);
        d["counters"] = counters_json(dev.numbers);
        d["sched"] = sched_json(dev.numbers);
        d["inflight"] = inflight_json(dev.inflight, snapshot.max_inflight_requests, snapshot.max_inflight_bytes);
        if (dev.faults) d["faults"] = faults_json(*dev.faults);
        if (dev.cohorts) d["io_cohorts"] = cohorts_json(*dev.cohorts);
        if (dev.memory_bytes) d["memory_bytes"] = *dev.memory_bytes;
        d["queues_opened"] = dev.queues_opened;
        d["exports"] = Json::array();
        for (const auto& [name, numbers] : dev.exports) {
            Json e = counters_json(numbers);
            e["name"] = name;
            d["exports"].push_back(std::move(e));
        }
        d["groups"] = Json::array();
        for (std::size_t id = 0; id < dev.groups.size(); ++id) {
            const auto& group = snapshot.groups[id];
            const auto& numbers = dev.groups[id];
            Json g;
            g["name"] = group.name;
            g["weight"] = group.weight;
            g["counters"] = counters_json(numbers.numbers);
            g["sched"] = sched_json(numbers.numbers);
            if (numbers.qos) g["qos"] = qos_json(group.qos, *numbers.qos);
            d["groups"].push_back(std::move(g));
        }
        d["queues"] = Json::array();
        for (const auto& q : dev.queues) {
            Json j;
            j["id"] = q.id;
            j["export"] = q.export_name;
            j["group"] = snapshot.group_name(q.group);
            j["peer"] = q.peer;
            j["counters"] = counters_json(q.numbers);
            j["sched"] = sched_json(q.numbers);
            // The queue's flags where its policy has them (bfq, cfq).
            if (q.io_bound) j["sched"]["io_bound"] = *q.io_bound;
            if (q.idle_window) j["sched"]["idle_window"] = *q.idle_window;
            d["queues"].push_back(std::move(j));
        }
        out["devices"].push_back(std::move(d));
    }
    return out;
}

Json stats_json(const DaemonState& state) {
    return stats_json(take_snapshot(state));
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
