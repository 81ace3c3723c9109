#include "daemon/stats/latency.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

namespace nbdsched::daemon::stats {

namespace {
constexpr std::uint64_t unit_ns = 1000;   // octave 0's step: 1us
}   // namespace

// Octave 0 covers [0, 16) units one unit per bucket; octave k >= 1 covers
// [16 * 2^(k-1), 16 * 2^k) units in 16 steps of 2^(k-1) units.
[[gnu::hot]] unsigned LatencyHistogram::bucket_of(Nanos latency) {
    auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(latency.count(), 0));
    std::uint64_t units = ns / unit_ns;
    if (units < sub_buckets) return static_cast<unsigned>(units);
    // units in [16 * 2^(k-1), 16 * 2^k) -> octave k, step 2^(k-1)
    unsigned top = static_cast<unsigned>(std::bit_width(units));   // >= 5
    unsigned octave = top - 4;
    if (octave >= octaves) return bucket_count - 1;
    // A shift, not a division by the step: four histograms take every request.
    unsigned sub = static_cast<unsigned>((units >> (octave - 1)) - sub_buckets);
    return octave * sub_buckets + std::min(sub, sub_buckets - 1);
}

Nanos LatencyHistogram::upper_edge(unsigned bucket) {
    unsigned octave = bucket / sub_buckets;
    unsigned sub = bucket % sub_buckets;
    if (octave == 0) return Nanos((sub + 1) * unit_ns);
    std::uint64_t step = std::uint64_t{1} << (octave - 1);
    return Nanos((sub_buckets * step + (sub + 1) * step) * unit_ns);
}

[[gnu::hot]] void LatencyHistogram::record(Nanos latency) {
    ++buckets_[bucket_of(latency)];
    ++count_;
    auto ns = static_cast<std::uint64_t>(std::max<std::int64_t>(latency.count(), 0));
    sum_ns_ += ns;
    max_ns_ = std::max(max_ns_, ns);
}

void LatencyHistogram::merge(const LatencyHistogram& other) {
    for (unsigned i = 0; i < bucket_count; ++i) buckets_[i] += other.buckets_[i];
    count_ += other.count_;
    sum_ns_ += other.sum_ns_;
    max_ns_ = std::max(max_ns_, other.max_ns_);
}

Nanos LatencyHistogram::mean() const {
    return count_ ? Nanos(sum_ns_ / count_) : Nanos(0);
}

Nanos LatencyHistogram::percentile(double p) const {
    if (count_ == 0) return Nanos(0);
    p = std::clamp(p, 0.0, 1.0);
    auto rank = static_cast<std::uint64_t>(std::ceil(p * static_cast<double>(count_)));
    rank = std::max<std::uint64_t>(rank, 1);
    // The first bucket whose samples and those below reach the rank. A
    // high percentile is found from the top (the largest sample's bucket)
    // down: a few buckets instead of hundreds, which matters when every
    // queue of every device is read while the event loops wait.
    if (p >= 0.5) {
        std::uint64_t upto = count_;   // samples in bucket i and below
        for (unsigned i = bucket_of(Nanos(max_ns_)) + 1; i-- > 0;) {
            if (upto - buckets_[i] < rank) return std::min(upper_edge(i), Nanos(max_ns_));
            upto -= buckets_[i];
        }
        return Nanos(max_ns_);
    }
    std::uint64_t seen = 0;
    for (unsigned i = 0; i < bucket_count; ++i) {
        seen += buckets_[i];
        if (seen >= rank) return std::min(upper_edge(i), Nanos(max_ns_));
    }
    return Nanos(max_ns_);
}

}   // namespace nbdsched::daemon::stats
