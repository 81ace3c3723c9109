// The simulator's `line` pool shares its slots by group weight, as the
// daemon's in-flight budget does with limits.inflight_fair_share (on by
// default): one call at a time, and two weighted groups flooding a device.
#include <doctest/doctest.h>

#include "sim_shapes.hpp"
#include "tools/sim/request_pool.hpp"

using namespace nbdsched;
using namespace nbdsched::sim;
using namespace nbdsched::sim::shapes;
using namespace std::chrono_literals;

namespace {

PoolSpec line_of(unsigned nr, bool fair_share) {
    PoolSpec p;
    p.mode = PoolSpec::Mode::line;
    p.nr_requests = nr;
    p.fair_share = fair_share;
    return p;
}

// Group "heavy" (weight 300) and "light" (100), one job each flooding 4k
// random reads at qd32, through `policy none` (FIFO: the pool alone decides
// who gets the device) with 8 slots.
Workload two_floods(bool fair_share) {
    Workload w = base("ssd", "none", "", "", 2s, 200ms);
    w.pool = line_of(8, fair_share);
    w.groups = {{"heavy", 300}, {"light", 100}};
    w.jobs.push_back(job("heavy", "heavy", sched::Op::read, Pattern::random, 4096, 32));
    w.jobs.push_back(job("light", "light", sched::Op::read, Pattern::random, 4096, 32));
    return w;
}

}   // namespace

TEST_CASE("request pool, line: a group's share is the pool by weight, and a group under it is admitted when full") {
    RequestPool pool(line_of(8, true), 2);
    pool.set_group(0, 1, 300);
    pool.set_group(1, 2, 100);
    for (int i = 0; i < 8; ++i) CHECK(pool.get(0, Nanos{}));   // alone: the whole pool
    CHECK_FALSE(pool.get(0, Nanos{}));
    // The light group's share is 8 x 100 / 400 = 2: it gets them although
    // the heavy one holds all 8, and no more.
    CHECK(pool.get(1, Nanos{}));
    CHECK(pool.get(1, Nanos{}));
    CHECK(pool.allocated() == 10);
    CHECK_FALSE(pool.get(1, Nanos{}));
    // The heavy group is over its share of 6: two of its frees wake nobody,
    // the light group's free goes to the light group's waiter.
    pool.put(0, 1ms);
    pool.put(0, 1ms);
    CHECK(pool.woken().empty());
    pool.put(1, 1ms);
    CHECK(pool.woken() == std::vector<std::size_t>{1});
    CHECK(pool.get(1, 1ms));   // its ticket
    // Now at its share of 6, the heavy group gets the next free of its own.
    pool.put(0, 2ms);
    CHECK(pool.woken() == std::vector<std::size_t>{0});
}

TEST_CASE("request pool, line: without fair_share one line for all, and a group alone keeps its share for share_idle") {
    RequestPool fifo(line_of(8, false), 2);
    fifo.set_group(0, 1, 300);
    fifo.set_group(1, 2, 100);
    for (int i = 0; i < 8; ++i) CHECK(fifo.get(0, Nanos{}));
    CHECK_FALSE(fifo.get(1, Nanos{}));   // full: the light group waits too

    RequestPool pool(line_of(8, true), 2);
    pool.set_group(0, 1, 300);
    pool.set_group(1, 2, 100);
    CHECK(pool.get(1, Nanos{}));
    pool.put(1, 1ms);   // the light group gave back its last slot at 1 ms
    for (int i = 0; i < 6; ++i) CHECK(pool.get(0, 10ms));
    CHECK_FALSE(pool.get(0, 10ms));   // 24 ms of share_idle: the light group still counts
    pool.put(0, 30ms);                // past it: the heavy group is alone, its waiter gets the whole pool
    CHECK(pool.woken() == std::vector<std::size_t>{0});
    CHECK(pool.get(0, 30ms));
    CHECK(pool.get(0, 30ms));
}

TEST_CASE("simulator, line pool: two groups flooding get the device 3:1 by weight, not 1:1") {
    Results fair = run(two_floods(true));
    Results fifo = run(two_floods(false));
    MESSAGE("heavy:light IOPS, 8 slots, weights 300:100: fair share " << group_ratio(fair) << " ("
                                                                      << fair.total.iops << " IOPS), one line "
                                                                      << group_ratio(fifo) << " (" << fifo.total.iops
                                                                      << " IOPS)");
    CHECK(group_ratio(fair) == doctest::Approx(3.0).epsilon(0.05));
    CHECK(group_ratio(fifo) == doctest::Approx(1.0).epsilon(0.05));
    // The pool stays at 8 either way: the shares add up to it.
    CHECK(fair.depth.max <= 8);
}
