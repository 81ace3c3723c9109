// groups[].reserve, .limit and .latency_target (sched/qos/spec.hpp).
#include "config/parsers.hpp"

namespace nbdsched::config::detail {

namespace {

std::optional<Nanos> read_duration(Reader& r, const Field& f, const sched::qos::DurationRange& range) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    auto d = parse_duration(*text);
    auto why = sched::qos::check_duration(range, d, *text);
    if (why.empty()) return d;
    r.error(f, why);
    return std::nullopt;
}

// {iops: N, bps: SIZE} (+ burst: DURATION for a limit); at least one rate.
void read_rate(Reader& r, const Field& field, sched::qos::Rate& rate, Nanos* burst) {
    std::initializer_list<std::string_view> rate_keys{"iops", "bps"}, limit_keys{"iops", "bps", "burst"};
    bool ok = r.read_map(field, burst ? limit_keys : rate_keys, [&](const Field& f) {
        if (f.key == "iops") {
            if (auto v = r.integer(f, sched::qos::min_iops, sched::qos::max_iops)) rate.iops = *v;
        } else if (f.key == "bps") {
            auto v = r.size(f);
            auto why = v ? sched::qos::check_bps(*v) : std::string();
            if (!why.empty()) r.error(f, why);
            if (v) rate.bps = *v;
        } else if (auto d = read_duration(r, f, sched::qos::burst_range)) {
            *burst = *d;
        }
    });
    const YAML::Node& map = field.value;
    if (ok && !map["iops"] && !map["bps"]) r.error(field, "needs iops:, bps: or both");
}

}   // namespace

bool parse_qos_key(Reader& r, const Field& f, Parsed<Group>& p) {
    sched::qos::GroupQos& q = p.value.qos;
    if (f.key == "reserve") {
        read_rate(r, f, q.reserve, nullptr);
    } else if (f.key == "limit") {
        read_rate(r, f, q.limit, &q.burst);
    } else if (f.key == "latency_target") {
        if (auto d = read_duration(r, f, sched::qos::latency_target_range))
            q.latency_target = *d;
    } else {
        return false;
    }
    return true;
}

// A limit below the reservation cannot be honoured: an error at the limit.
void check_qos(Reader& r, const Parsed<Group>& p) {
    auto why = sched::qos::check(p.value.qos);
    if (why.empty()) return;
    r.error(p.where("limit"), p.key("limit"), "group '" + p.value.name + "': " + why);
}

}   // namespace nbdsched::config::detail
