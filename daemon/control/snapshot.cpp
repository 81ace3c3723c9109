#include "daemon/control/snapshot.hpp"

#include "backend/factory.hpp"
#include "daemon/stats/catalog.hpp"

namespace nbdsched::daemon::control {

Numbers numbers_of(const stats::Counters* c, const sched::EntityStats* s) {
    Numbers n;
    if (!c && !s) return n;
    const auto catalog = stats::catalog();
    n.values.reserve(catalog.size());
    for (const auto& stat : catalog) {
        if (stat.from_sched())
            n.values.push_back(s ? stat.sched(*s) : 0);
        else
            n.values.push_back(c ? stat.counters(*c) : 0);
    }
    return n;
}

namespace {

template <typename Map>
const typename Map::mapped_type* find_in(const Map& map, const typename Map::key_type& key) {
    auto it = map.find(key);
    return it == map.end() ? nullptr : &it->second;
}

DeviceSnapshot device_snapshot(Device& dev, const DaemonState& state, std::size_t groups, Nanos now) {
    DeviceSnapshot d;
    const auto& st = dev.stats();
    auto ss = dev.scheduler().stats(now);
    d.name = dev.name();
    d.scheduler = std::string(dev.scheduler().policy());
    d.hw_tag = ss.hw_tag;
    d.idling = ss.idling;
    d.lock_lost = state.lock_lost(dev.name());
    d.numbers = numbers_of(&st.device(), &ss.device);
    d.inflight = dev.inflight_budget().stats();
    if (auto f = backend::fault_stats(dev.backend())) d.faults = *f;
    d.cohorts = backend::cohort_stats(dev.backend());
    d.memory_bytes = dev.backend().memory_bytes();
    d.storage_error = dev.backend().storage_error();
    d.queues_opened = st.queues_opened();
    d.exports.reserve(st.exports().size());
    for (const auto& [name, c] : st.exports()) d.exports.emplace_back(name, numbers_of(&c, nullptr));
    d.groups.resize(groups);
    for (std::size_t id = 0; id < groups; ++id) {
        auto gid = static_cast<sched::GroupId>(id);
        auto& g = d.groups[id];
        g.numbers = numbers_of(find_in(st.groups(), gid), find_in(ss.groups, gid));
        if (auto q = find_in(ss.qos, gid)) g.qos = *q;
    }
    d.queues.reserve(st.queues().size());
    for (const auto& [id, q] : st.queues()) {
        const sched::QueueStats none;
        const auto* s = find_in(ss.queues, id);
        if (!s) s = &none;
        d.queues.push_back({id, q.info.export_name, q.info.group, q.info.peer, numbers_of(&q.counters, s), s->io_bound,
                            s->idle_window});
    }
    return d;
}

}   // namespace

const std::string& StatsSnapshot::group_name(sched::GroupId id) const {
    static const std::string unknown = "?";
    return id < groups.size() ? groups[id].name : unknown;
}

StatsSnapshot take_snapshot(const DaemonState& state) {
    StatsSnapshot out;
    out.max_inflight_requests = state.config->limits.max_inflight_per_device;
    out.max_inflight_bytes = state.config->limits.max_inflight_bytes_per_device;
    state.exclusive([&] {
        // The group table lives on this loop; it is read here so that its
        // size matches what the devices were asked about.
        out.groups.reserve(state.groups->size());
        for (const auto& g : state.groups->entries()) out.groups.push_back({g.name, g.weight, g.qos});
        auto now = steady_now();
        out.devices.reserve(state.devices->size());
        for (const auto& dev : *state.devices) out.devices.push_back(device_snapshot(*dev, state, out.groups.size(), now));
    });
    return out;
}

}   // namespace nbdsched::daemon::control
