// A latency histogram with bounded relative error and fixed memory, so every
// queue of every device can keep one: log-linear buckets (each power of two
// split into 16 linear steps, ~6% resolution) from 1us up to ~1 hour.
// Percentiles are reported as the upper edge of the bucket they fall in.
#pragma once

#include <array>
#include <cstdint>

#include "common/units.hpp"

namespace nbdsched::daemon::stats {

class LatencyHistogram {
public:
    static constexpr unsigned sub_buckets = 16;
    static constexpr unsigned octaves = 32;   // 1us * 2^32 ~ 71 minutes
    static constexpr unsigned bucket_count = sub_buckets * octaves;

    void record(Nanos latency);
    void merge(const LatencyHistogram& other);

    std::uint64_t count() const { return count_; }
    Nanos total() const { return Nanos(sum_ns_); }
    Nanos mean() const;
    // p in [0, 1]: the smallest bucket edge at or below which p of the samples lie.
    Nanos percentile(double p) const;
    Nanos max() const { return Nanos(max_ns_); }

    // Bucket layout, for tests: the index of a latency and a bucket's upper edge.
    static unsigned bucket_of(Nanos latency);
    static Nanos upper_edge(unsigned bucket);

private:
    std::array<std::uint64_t, bucket_count> buckets_{};
    std::uint64_t count_ = 0;
    std::uint64_t sum_ns_ = 0;
    std::uint64_t max_ns_ = 0;
};

}   // namespace nbdsched::daemon::stats
