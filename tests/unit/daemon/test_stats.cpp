// daemon/stats: the latency histogram and the per-device counters.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "daemon/stats/counters.hpp"
#include "daemon/stats/latency.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon::stats;
using std::chrono::microseconds;
using std::chrono::milliseconds;

TEST_CASE("latency buckets are contiguous and grow geometrically") {
    Nanos prev(0);
    for (unsigned b = 0; b + 1 < LatencyHistogram::bucket_count; ++b) {
        auto edge = LatencyHistogram::upper_edge(b);
        CHECK(edge > prev);
        // a latency just below the edge lands in this bucket, the edge itself in the next
        CHECK(LatencyHistogram::bucket_of(edge - Nanos(1)) == b);
        CHECK(LatencyHistogram::bucket_of(edge) == b + 1);
        if (b >= LatencyHistogram::sub_buckets) CHECK((edge - prev) * 16 <= edge);   // at most 1/16 wide
        prev = edge;
    }
    CHECK(LatencyHistogram::bucket_of(Nanos(-5)) == 0);
    CHECK(LatencyHistogram::bucket_of(std::chrono::hours(1000)) == LatencyHistogram::bucket_count - 1);
}

TEST_CASE("latency mean and percentiles") {
    LatencyHistogram h;
    CHECK(h.percentile(0.5) == Nanos(0));
    CHECK(h.mean() == Nanos(0));
    for (int i = 1; i <= 100; ++i) h.record(microseconds(i * 100));   // 0.1ms .. 10ms
    CHECK(h.count() == 100);
    CHECK(h.mean() == microseconds(5050));
    auto p50 = h.percentile(0.5);
    CHECK(p50 >= microseconds(5000));
    CHECK(p50 <= microseconds(5000) * 107 / 100);
    auto p99 = h.percentile(0.99);
    CHECK(p99 >= microseconds(9900));
    CHECK(p99 <= milliseconds(10));   // capped by the max sample
    CHECK(h.percentile(1.0) == milliseconds(10));
    LatencyHistogram other;
    other.record(milliseconds(50));
    h.merge(other);
    CHECK(h.count() == 101);
    CHECK(h.max() == milliseconds(50));
}

TEST_CASE("a percentile is the upper edge of the bucket of the sample at its rank, from either end") {
    std::mt19937_64 rng(7);
    for (int round = 0; round < 50; ++round) {
        LatencyHistogram h;
        std::vector<Nanos> samples;
        const int n = 1 + static_cast<int>(rng() % 300);
        for (int i = 0; i < n; ++i) {
            samples.push_back(Nanos(static_cast<std::int64_t>(rng() % (1u << (5 + round % 20)))));
            h.record(samples.back());
        }
        std::sort(samples.begin(), samples.end());
        for (double p : {0.0, 0.01, 0.25, 0.5, 0.51, 0.9, 0.99, 0.999, 1.0}) {
            CAPTURE(n);
            CAPTURE(p);
            auto rank = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(p * n)));
            auto at_rank = samples[rank - 1];
            auto want = std::min(LatencyHistogram::upper_edge(LatencyHistogram::bucket_of(at_rank)), samples.back());
            CHECK(h.percentile(p) == want);
        }
    }
}

TEST_CASE("device stats route a queue's requests to its export and group") {
    DeviceStats s;
    s.open_queue(1, {"a", 0, "p1"});
    s.open_queue(2, {"b", 1, "p2"});
    s.submitted(1);
    s.submitted(2);
    s.submitted(2);
    CHECK(s.device().in_flight == 3);
    CHECK(s.queues().at(2).counters.in_flight == 2);
    s.done(1, sched::Op::read, 4096, microseconds(100), false);
    s.done(2, sched::Op::write, 8192, microseconds(200), false);
    s.done(2, sched::Op::flush, 0, microseconds(300), true);
    CHECK(s.device().requests() == 3);
    CHECK(s.device().in_flight == 0);
    CHECK(s.device().read_bytes == 4096);
    CHECK(s.device().write_bytes == 8192);
    CHECK(s.device().errors == 1);
    CHECK(s.exports().at("a").reads == 1);
    CHECK(s.exports().at("b").writes == 1);
    CHECK(s.exports().at("b").flushes == 1);
    CHECK(s.groups().at(1).requests() == 2);
    CHECK(s.groups().at(0).latency.count() == 1);
    s.close_queue(2);
    CHECK(s.queues().size() == 1);
    CHECK(s.groups().at(1).requests() == 2);   // closing keeps the group's counts
    CHECK(s.queues_opened() == 2);
    s.readahead_hit(1);
    CHECK(s.device().readahead_hits == 1);
    CHECK(s.exports().at("a").readahead_hits == 1);
    // every op kind lands in its own counter
    for (auto op : {sched::Op::trim, sched::Op::write_zeroes}) {
        s.submitted(1);
        s.done(1, op, 512, microseconds(1), false);
    }
    CHECK(s.queues().at(1).counters.trims == 1);
    CHECK(s.queues().at(1).counters.zeroes == 1);
    CHECK(s.device().write_bytes == 8192);   // trims/zeroes move no data
    // a closed client's read answered unread: cancelled, not a read, no latency
    s.submitted(1);
    s.cancelled(1);
    CHECK(s.device().cancelled == 1);
    CHECK(s.groups().at(0).cancelled == 1);
    CHECK(s.exports().at("a").cancelled == 1);
    CHECK(s.device().in_flight == 0);
    CHECK(s.exports().at("a").reads == 1);
    CHECK(s.groups().at(0).latency.count() == 3);
}
