// groups[].reserve, .limit and .latency_target (sched/qos/spec.hpp).
#include "config/parsers.hpp"

namespace nbdsched::config::detail {

namespace {

std::optional<Nanos> read_duration(Reader& r, const Field& f, Nanos min, Nanos max, const char* example) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    auto d = parse_duration(*text);
    if (d && *d >= min && *d <= max) return d;
    r.error(f, "expected a duration from " + format_duration(min) + " to " + format_duration(max) + ", e.g. " +
                   example + ", got '" + *text + "'");
    return std::nullopt;
}

// {iops: N, bps: SIZE} (+ burst: DURATION for a limit); at least one rate.
void read_rate(Reader& r, const Field& field, sched::qos::Rate& rate, Nanos* burst) {
    std::initializer_list<std::string_view> rate_keys{"iops", "bps"}, limit_keys{"iops", "bps", "burst"};
    bool ok = r.read_map(field, burst ? limit_keys : rate_keys, [&](const Field& f) {
        if (f.key == "iops") {
            if (auto v = r.integer(f, 1, 100'000'000)) rate.iops = *v;
        } else if (f.key == "bps") {
            auto v = r.size(f);
            if (v && *v == 0) r.error(f, "bps must be above 0 (leave it out for no byte rate)");
            if (v) rate.bps = *v;
        } else if (auto d = read_duration(r, f, std::chrono::milliseconds(1), std::chrono::seconds(10), "100ms")) {
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
        if (auto d = read_duration(r, f, std::chrono::microseconds(100), std::chrono::seconds(10), "10ms"))
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
