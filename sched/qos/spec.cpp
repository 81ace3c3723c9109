#include "sched/qos/spec.hpp"

namespace nbdsched::sched::qos {

std::string to_string(const Rate& rate) {
    std::string out;
    if (rate.iops) out = "iops " + std::to_string(rate.iops);
    if (rate.bps) out += (out.empty() ? "" : ", ") + std::string("bps ") + format_size(rate.bps);
    return out.empty() ? "none" : out;
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
