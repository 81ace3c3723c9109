#include "tools/sim/results.hpp"

#include <algorithm>
#include <cmath>

namespace nbdsched::sim {

void LatencyLog::append(const LatencyLog& other) {
    ns_.insert(ns_.end(), other.ns_.begin(), other.ns_.end());
}

LatencySummary LatencyLog::summarise() const {
    LatencySummary s;
    if (ns_.empty()) return s;
    double sum = 0;
    for (auto v : ns_) sum += double(v);
    double mean = sum / double(ns_.size());
    double sq = 0;
    for (auto v : ns_) sq += (double(v) - mean) * (double(v) - mean);
    std::vector<std::int64_t> sorted = ns_;
    // p99 as fio reports it: the smallest value with >= 99% of samples at or below.
    std::size_t rank = std::size_t(std::ceil(0.99 * double(sorted.size())));
    rank = std::clamp<std::size_t>(rank, 1, sorted.size()) - 1;
    std::nth_element(sorted.begin(), sorted.begin() + std::ptrdiff_t(rank), sorted.end());
    s.mean_us = mean / 1e3;
    s.stddev_us = std::sqrt(sq / double(ns_.size())) / 1e3;
    s.p99_us = double(sorted[rank]) / 1e3;
    s.max_us = double(*std::max_element(ns_.begin(), ns_.end())) / 1e3;
    return s;
}

void finish_entity(EntityResult& r, const LatencyLog& log, Nanos measured) {
    double seconds = double(measured.count()) / 1e9;
    if (seconds > 0) {
        r.iops = double(r.ios) / seconds;
        r.mib_s = double(r.bytes) / seconds / (1024.0 * 1024.0);
    }
    r.latency = log.summarise();
}

}   // namespace nbdsched::sim
