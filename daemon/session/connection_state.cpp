#include "daemon/session/connection_state.hpp"

#include <nlohmann/json.hpp>
#include <limits>
#include <stdexcept>

#include "common/hex.hpp"
#include "common/json_text.hpp"
#include "common/utf8.hpp"
#include "sched/weight.hpp"

namespace nbdsched::daemon {

namespace {

using nlohmann::json;

// A whole number that fits T; anything else (a fraction, a value out of
// T's range) throws: json::get<T>() would wrap it, or, from a double out
// of range, be undefined behaviour.
template <typename T>
T whole(const json& j) {
    if (!j.is_number_integer()) throw std::invalid_argument("not a whole number: " + j.dump());
    if (j.is_number_unsigned()) {
        const auto v = j.get<std::uint64_t>();
        if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
            throw std::out_of_range("out of range: " + j.dump());
        return static_cast<T>(v);
    }
    const auto v = j.get<std::int64_t>();
    if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
        (v > 0 && static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max())))
        throw std::out_of_range("out of range: " + j.dump());
    return static_cast<T>(v);
}

json peer_json(const PeerInfo& p) {
    json j = {{"unix", p.is_unix}, {"groups", p.groups}, {"cgroup", p.cgroup}, {"address", p.address}};
    if (p.pid) j["pid"] = *p.pid;
    if (p.uid) j["uid"] = *p.uid;
    if (p.gid) j["gid"] = *p.gid;
    // A cgroup's name may be any bytes, a JSON string only UTF-8. The new
    // process matches the cgroup against allow: and rules: (a connection
    // whose group is gone is classified again) and reads its weight, so
    // it travels exact, as hex. "cgroup" keeps a readable form (U+FFFD
    // for the bad bytes) for a reader of this version that predates it.
    if (!is_utf8(p.cgroup))
        j["cgroup_hex"] = to_hex({reinterpret_cast<const std::uint8_t*>(p.cgroup.data()), p.cgroup.size()});
    return j;
}

PeerInfo peer_from(const json& j) {
    PeerInfo p;
    p.is_unix = j.at("unix").get<bool>();
    if (!j.at("groups").is_array()) throw std::invalid_argument("groups: not a list");
    for (const auto& g : j.at("groups")) p.groups.push_back(whole<std::uint32_t>(g));
    p.cgroup = j.at("cgroup").get<std::string>();
    if (j.contains("cgroup_hex")) {
        auto bytes = from_hex(j["cgroup_hex"].get<std::string>());
        if (!bytes) throw std::invalid_argument("cgroup_hex: not an even number of lower-case hex digits");
        p.cgroup.assign(bytes->begin(), bytes->end());
    }
    p.address = j.at("address").get<std::string>();
    if (j.contains("pid")) p.pid = whole<std::int32_t>(j["pid"]);
    if (j.contains("uid")) p.uid = whole<std::uint32_t>(j["uid"]);
    if (j.contains("gid")) p.gid = whole<std::uint32_t>(j["gid"]);
    return p;
}

int fd_index(const json& j, std::size_t fd_count) {
    const int fd = whole<int>(j.at("fd"));
    if (fd < 0 || static_cast<std::size_t>(fd) >= fd_count)
        throw std::out_of_range("descriptor index " + std::to_string(fd) + " outside the " +
                                std::to_string(fd_count) + " passed");
    return fd;
}

// Counts and durations in nanoseconds: exact, whatever the units written.
json qos_json(const sched::qos::GroupQos& q) {
    return {{"reserve_iops", q.reserve.iops}, {"reserve_bps", q.reserve.bps}, {"limit_iops", q.limit.iops}, {"limit_bps", q.limit.bps}, {"burst_ns", q.burst.count()}, {"latency_target_ns", q.latency_target.count()}};
}

sched::qos::GroupQos qos_from(const json& j) {
    sched::qos::GroupQos q;
    q.reserve = {whole<std::uint64_t>(j.at("reserve_iops")), whole<std::uint64_t>(j.at("reserve_bps"))};
    q.limit = {whole<std::uint64_t>(j.at("limit_iops")), whole<std::uint64_t>(j.at("limit_bps"))};
    q.burst = Nanos(whole<Nanos::rep>(j.at("burst_ns")));
    q.latency_target = Nanos(whole<Nanos::rep>(j.at("latency_target_ns")));
    return q;
}

json live_changes_json(const LiveChanges& changes) {
    json weights = json::array();
    for (const auto& w : changes.weights)
        weights.push_back({{"group", w.group}, {"weight", w.weight}, {"file_weight", w.file_weight}});
    json tunables = json::array();
    for (const auto& t : changes.tunables) {
        json entry = {{"device", t.device}, {"policy", t.policy}, {"name", t.name}, {"value", t.value}};
        if (t.file_value) entry["file_value"] = *t.file_value;
        tunables.push_back(std::move(entry));
    }
    json faults = json::array();
    for (const auto& f : changes.faults) faults.push_back({{"device", f.device}, {"enabled", f.enabled}});
    json qos = json::array();
    for (const auto& q : changes.qos)
        qos.push_back({{"group", q.group}, {"qos", qos_json(q.qos)}, {"file_qos", qos_json(q.file_qos)}});
    return {{"weights", weights}, {"tunables", tunables}, {"faults", faults}, {"qos", qos}};
}

LiveChanges live_changes_from(const json& j) {
    LiveChanges changes;
    for (const auto& w : j.at("weights")) {
        changes.weights.push_back(
            {w.at("group").get<std::string>(), whole<unsigned>(w.at("weight")), whole<unsigned>(w.at("file_weight"))});
        // Applied to every device's scheduler as it stands: the range ctl and the configuration allow.
        if (auto why = sched::check_weight(changes.weights.back().weight); !why.empty())
            throw std::out_of_range("ctl weight " + changes.weights.back().group + ": " + why);
    }
    for (const auto& t : j.at("tunables")) {
        LiveChanges::Tunable entry{t.at("device").get<std::string>(), t.at("policy").get<std::string>(),
                                   t.at("name").get<std::string>(), t.at("value").get<std::string>(), std::nullopt};
        if (t.contains("file_value")) entry.file_value = t["file_value"].get<std::string>();
        changes.tunables.push_back(std::move(entry));
    }
    for (const auto& f : j.at("faults"))
        changes.faults.push_back({f.at("device").get<std::string>(), f.at("enabled").get<bool>()});
    if (j.contains("qos"))   // absent from a process that did not carry them yet
        for (const auto& q : j["qos"])
            changes.qos.push_back({q.at("group").get<std::string>(), qos_from(q.at("qos")), qos_from(q.at("file_qos"))});
    return changes;
}

}   // namespace

std::string to_json(const HandoverState& state) {
    json listeners = json::array();
    for (const auto& l : state.listeners) listeners.push_back({{"fd", l.fd}, {"tls", static_cast<int>(l.tls_mode)}});
    json connections = json::array();
    for (const auto& c : state.connections)
        connections.push_back({{"id", c.id},
                               {"peer", c.peer},
                               {"identity", peer_json(c.identity)},
                               {"export", c.export_name},
                               {"size", c.export_size},
                               {"flags", c.transmission_flags},
                               {"structured", c.structured},
                               {"block_status", c.block_status},
                               {"group", c.group},
                               {"unread", to_hex(c.unread)},
                               {"fd", c.fd}});
    json j = {{"version", state.version},
              {"listeners", listeners},
              {"connections", connections},
              {"ctl_changes", live_changes_json(state.live_changes)}};
    return json_text(j);   // the other strings are for logs or come from the UTF-8-only config
}

std::optional<HandoverState> handover_from_json(const std::string& text, std::size_t fd_count, std::string& error) {
    try {
        const json j = json::parse(text);
        HandoverState s;
        s.version = whole<int>(j.at("version"));
        if (s.version != HandoverState::current_version) {
            error = "hand-over state version " + std::to_string(s.version) + ", this nbdsched reads version " +
                    std::to_string(HandoverState::current_version);
            return std::nullopt;
        }
        for (const auto& l : j.at("listeners")) {
            const int tls = whole<int>(l.at("tls"));
            if (tls < 0 || tls > static_cast<int>(nbd::TlsMode::require)) throw std::out_of_range("bad tls mode");
            s.listeners.push_back({fd_index(l, fd_count), static_cast<nbd::TlsMode>(tls)});
        }
        for (const auto& c : j.at("connections")) {
            ConnectionState cs;
            cs.id = whole<std::uint64_t>(c.at("id"));
            cs.peer = c.at("peer").get<std::string>();
            cs.identity = peer_from(c.at("identity"));
            cs.export_name = c.at("export").get<std::string>();
            cs.export_size = whole<std::uint64_t>(c.at("size"));
            cs.transmission_flags = whole<std::uint16_t>(c.at("flags"));
            cs.structured = c.at("structured").get<bool>();
            cs.block_status = c.at("block_status").get<bool>();
            cs.group = c.at("group").get<std::string>();
            // `unread` as hex: at most one read buffer per connection, and readable in a log.
            auto unread = from_hex(c.at("unread").get<std::string>());
            if (!unread) throw std::invalid_argument("unread: not an even number of lower-case hex digits");
            cs.unread = std::move(*unread);
            cs.fd = fd_index(c, fd_count);
            s.connections.push_back(std::move(cs));
        }
        // Absent in a state from a process that carried no ctl changes yet.
        if (j.contains("ctl_changes")) s.live_changes = live_changes_from(j["ctl_changes"]);
        return s;
    } catch (const std::exception& e) {
        error = std::string("malformed hand-over state: ") + e.what();
        return std::nullopt;
    }
}

}   // namespace nbdsched::daemon
