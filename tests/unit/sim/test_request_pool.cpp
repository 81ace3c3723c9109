// The request pool in front of the scheduler: the legacy Linux allocator's
// rules one call at a time (block/blk-core.c, 4.x), and what it does to
// seed 000's cloud shape in virtual time. The question it answers: does the
// kernel's allocator, by delivering bursts from one process at a time, let
// CFQ keep more than quantum (8) reads at the device (the only-busy-queue
// rule of cfq_may_dispatch)? It does not: see the last case.
#include <doctest/doctest.h>

#include <optional>

#include "sim_shapes.hpp"
#include "tools/sim/request_pool.hpp"

using namespace nbdsched;
using namespace nbdsched::sim;
using namespace std::chrono_literals;

namespace {

PoolSpec small(PoolSpec::Mode mode) {
    PoolSpec p;
    p.mode = mode;
    p.nr_requests = 8;
    p.batch_requests = 4;
    p.batch_time = 20ms;
    return p;
}

// Frees one request of `job`; returns the one job it woke, if any.
std::optional<std::size_t> put(RequestPool& pool, std::size_t job, Nanos now) {
    pool.put(job, now);
    auto woken = pool.woken();
    REQUIRE(woken.size() <= 1);
    if (woken.empty()) return std::nullopt;
    return woken.front();
}

unsigned take(RequestPool& pool, std::size_t job, Nanos now, unsigned tries) {
    unsigned got = 0;
    while (got < tries && pool.get(job, now)) ++got;
    return got;
}

}   // namespace

TEST_CASE("request pool, batching: the process that fills the pool becomes a batcher") {
    RequestPool pool(small(PoolSpec::Mode::batching), 3);
    // Below nr_requests anyone allocates. The 8th allocation fills the pool:
    // its process becomes a batcher (4 requests) and may go on to 3 more.
    CHECK(take(pool, 0, Nanos{}, 11) == 11);
    CHECK(pool.allocated() == 11);
    CHECK_FALSE(pool.get(1, Nanos{}));   // full, not a batcher: sleeps
    CHECK_FALSE(pool.get(0, Nanos{}));   // its batch used up: sleeps too, behind job 1
    CHECK(pool.sleeping() == 2);
    // Frees wake nobody until the pool is below nr_requests.
    for (int i = 0; i < 3; ++i) CHECK_FALSE(put(pool, 0, 1ms));
    CHECK(pool.allocated() == 8);
    auto woken = put(pool, 0, 1ms);   // 7 left: one sleeper, the oldest
    REQUIRE(woken);
    CHECK(*woken == 1);
    // The woken process is a batcher: it takes the pool from 7 to 11
    // (4 requests), above nr_requests.
    CHECK(take(pool, 1, 1ms, 10) == 4);
    CHECK(pool.allocated() == 11);
    CHECK(pool.sleeping() == 2);   // job 0, then job 1 again
    CHECK(pool.sleeps() == 3);
}

TEST_CASE("request pool, batching: the batch lasts batch_time and stops at 3/2 x nr_requests") {
    PoolSpec spec = small(PoolSpec::Mode::batching);
    spec.batch_requests = 32;
    RequestPool pool(spec, 2);
    CHECK(take(pool, 0, Nanos{}, 40) == 12);   // 3/2 x 8, although the batch has more
    RequestPool late(small(PoolSpec::Mode::batching), 2);
    CHECK(take(late, 0, Nanos{}, 9) == 9);   // a batcher from the 8th, one used
    CHECK_FALSE(late.get(0, 25ms));          // 20 ms later it is a batcher no longer
}

TEST_CASE("request pool, line: one request per job in turn, as nbdsched admits") {
    RequestPool pool(small(PoolSpec::Mode::line), 2);
    CHECK(take(pool, 0, Nanos{}, 8) == 8);
    CHECK_FALSE(pool.get(1, Nanos{}));   // no overshoot, no batches
    CHECK_FALSE(pool.get(0, Nanos{}));   // job 0 too, behind job 1
    auto woken = put(pool, 0, 1ms);
    REQUIRE(woken);
    CHECK(*woken == 1);              // the slot goes to the head of the line as a ticket
    CHECK(pool.get(1, 1ms));         // its ticket
    CHECK_FALSE(pool.get(1, 1ms));   // its next request goes to the back of the line
    CHECK(pool.allocated() == 8);
    CHECK(*put(pool, 0, 2ms) == 0);
}

TEST_CASE("request pool: seed 000 cloud shape, the batching allocator gives CFQ no depth beyond quantum") {
    Results unlimited_on = shapes::run(shapes::seed000_cloud("8ms", PoolSpec::Mode::unlimited));
    Results unlimited_off = shapes::run(shapes::seed000_cloud("0", PoolSpec::Mode::unlimited));
    Results line_on = shapes::run(shapes::seed000_cloud("8ms", PoolSpec::Mode::line));
    Results line_off = shapes::run(shapes::seed000_cloud("0", PoolSpec::Mode::line));
    Workload traced = shapes::seed000_cloud("0", PoolSpec::Mode::batching);
    traced.trace_window = 100ms;
    Results batch_off = shapes::run(traced);
    Results batch_on = shapes::run(shapes::seed000_cloud("8ms", PoolSpec::Mode::batching));
    MESSAGE("seed000 cloud IOPS (depth mean) 8ms / 0: unlimited " << unlimited_on.total.iops << " ("
                                                                  << unlimited_on.depth.mean << ") / " << unlimited_off.total.iops << " (" << unlimited_off.depth.mean
                                                                  << "); line " << line_on.total.iops << " (" << line_on.depth.mean << ") / " << line_off.total.iops
                                                                  << " (" << line_off.depth.mean << "); batching " << batch_on.total.iops << " (" << batch_on.depth.mean
                                                                  << ") / " << batch_off.total.iops << " (" << batch_off.depth.mean << ")");

    // The trace: every job sleeps on the pool; a wake-up comes only when the
    // pool is below nr_requests and brings one process's burst (up to 32).
    REQUIRE_FALSE(batch_off.depth.trace.empty());
    unsigned biggest_jump = 0;
    for (std::size_t i = 0; i < batch_off.depth.trace.size(); ++i) {
        const DepthSample& d = batch_off.depth.trace[i];
        CHECK(d.pool <= 192);   // 3/2 x 128
        CHECK(d.pool == d.device + d.queued);
        if (d.sleeping > 0) CHECK(d.pool >= 127);
        // So the scheduler holds more than one job's 64 reads: at least two
        // queues are busy, and cfq_may_dispatch's "sole queue, no limit"
        // (busy_queues == 1) never applies.
        if (d.sleeping > 0) CHECK(d.queued > 64);
        if (i > 0 && d.pool > batch_off.depth.trace[i - 1].pool)
            biggest_jump = std::max(biggest_jump, d.pool - batch_off.depth.trace[i - 1].pool);
    }
    CHECK(biggest_jump > 16);   // bursts, not one request at a time
    CHECK(biggest_jump <= 32);
    // The depth stays at quantum, plus the overlap when a queue switch
    // leaves the last one's reads at the device.
    CHECK(batch_off.depth.mean < 8.5);
    CHECK(batch_off.depth.max <= 16);
    CHECK(unlimited_off.depth.mean < 8.5);
    CHECK(line_off.depth.mean < 9.5);
    // Without idling the gain over idling stays near 2x with every pool; with
    // the batching pool it shrinks (fewer busy queues: longer scaled slices,
    // so idling no longer holds queues at quantum/2). None reaches 3x.
    for (auto [on, off] : {std::pair{&unlimited_on, &unlimited_off}, std::pair{&line_on, &line_off},
                           std::pair{&batch_on, &batch_off}})
        CHECK(off->total.iops / on->total.iops < 3.0);
    CHECK(unlimited_off.total.iops / unlimited_on.total.iops > 1.8);
    CHECK(batch_off.total.iops / batch_on.total.iops < 1.5);
}
