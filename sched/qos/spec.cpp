#include "sched/qos/spec.hpp"

namespace nbdsched::sched::qos {

std::string to_string(const Rate& rate) {
    std::string out;
    if (rate.iops) out = "iops " + std::to_string(rate.iops);
    if (rate.bps) out += (out.empty() ? "" : ", ") + std::string("bps ") + format_size(rate.bps);
    return out.empty() ? "none" : out;
}

std::string to_string(const GroupQos& qos) {
    return "reserve " + to_string(qos.reserve) + ", limit " + to_string(qos.limit) +
           (qos.limit.set() ? " (burst " + format_duration(qos.burst) + ")" : "") + ", latency target " +
           (qos.latency_target.count() ? format_duration(qos.latency_target) : "none");
}

std::string check_iops(std::uint64_t iops) {
    if (iops >= min_iops && iops <= max_iops) return {};
    return "out of range: " + std::to_string(iops) + " (allowed " + std::to_string(min_iops) + ".." +
           std::to_string(max_iops) + ")";
}

std::string check_bps(std::uint64_t bps) {
    if (bps == 0) return "bps must be above 0 (leave it out for no byte rate)";
    if (bps >= min_bps) return {};
    return "bps " + format_size(bps) + " is below " + format_size(min_bps) + ", one 4KiB request a second (bps is bytes per second: " +
           std::to_string(bps) + "MiB for " + std::to_string(bps) + " MiB/s)";
}

std::string check_duration(const DurationRange& range, std::optional<Nanos> value, std::string_view text) {
    if (value && *value >= range.min && *value <= range.max) return {};
    return "expected a duration from " + format_duration(range.min) + " to " + format_duration(range.max) +
           ", e.g. " + range.example + ", got '" + std::string(text) + "'";
}

std::string check(const GroupQos& qos) {
    auto below = [](const char* what, std::uint64_t limit, std::uint64_t reserve, bool bytes) {
        auto show = [&](std::uint64_t v) { return bytes ? format_size(v) : std::to_string(v); };
        return std::string("limit ") + what + " " + show(limit) + " is below reserve " + what + " " + show(reserve);
    };
    if (qos.limit.iops && qos.reserve.iops > qos.limit.iops)
        return below("iops", qos.limit.iops, qos.reserve.iops, false);
    if (qos.limit.bps && qos.reserve.bps > qos.limit.bps) return below("bps", qos.limit.bps, qos.reserve.bps, true);
    if (qos.limit.set() && qos.burst.count() <= 0) return "burst must be above 0";
    return {};
}

}   // namespace nbdsched::sched::qos
