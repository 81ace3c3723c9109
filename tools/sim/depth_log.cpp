#include "tools/sim/depth_log.hpp"

#include <algorithm>

namespace nbdsched::sim {

void DepthLog::account(Nanos until) {
    Nanos a = std::max(last_at_, from_), b = std::min(until, to_);
    if (b <= a) return;
    if (p_.time_at.size() <= last_.device) p_.time_at.resize(last_.device + 1);
    p_.time_at[last_.device] += b - a;
    p_.max = std::max(p_.max, last_.device);
}

void DepthLog::record(Nanos now, const DepthSample& s) {
    account(now);
    last_at_ = now;
    if (now >= from_ && now < trace_end_ && (p_.trace.empty() || !(p_.trace.back() == s))) {
        if (!p_.trace.empty() && p_.trace.back().at == now) p_.trace.back() = s;   // one sample per instant
        else p_.trace.push_back(s);
        p_.trace.back().at = now;
    }
    last_ = s;
}

DepthProfile DepthLog::finish() {
    account(to_);
    last_at_ = to_;
    double total = 0, weighted = 0;
    for (std::size_t d = 0; d < p_.time_at.size(); ++d) {
        total += double(p_.time_at[d].count());
        weighted += double(d) * double(p_.time_at[d].count());
    }
    p_.mean = total > 0 ? weighted / total : 0;
    return std::move(p_);
}

}   // namespace nbdsched::sim
