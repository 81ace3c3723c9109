// CFQ: tunables, conservation, depth limit, FIFO expiry, hw_tag detection.
#include "test_cfq_rig.hpp"

using namespace cfqtest;

TEST_CASE("cfq: tunables have kernel names, defaults and seed-000 auto slice_idle") {
    auto names = tunable_names("cfq");
    for (const char* n : {"slice_idle", "group_idle", "slice_sync", "slice_async", "slice_async_rq",
                          "quantum", "fifo_expire_sync", "fifo_expire_async", "back_seek_max",
                          "back_seek_penalty", "low_latency", "target_latency"})
        CHECK(std::find(names.begin(), names.end(), n) != names.end());

    auto rot = make_cfq_sched(true, 1);
    auto ssd = make_cfq_sched(false, 32);
    CHECK(rot->get_tunable("slice_idle") == "8ms");
    CHECK(ssd->get_tunable("slice_idle") == "0");
    CHECK(ssd->get_tunable("group_idle") == "8ms");   // seed 003: stays on
    CHECK(ssd->get_tunable("slice_sync") == "100ms");
    CHECK(ssd->get_tunable("slice_async") == "40ms");
    CHECK(ssd->get_tunable("fifo_expire_sync") == "125ms");
    CHECK(ssd->get_tunable("fifo_expire_async") == "250ms");
    CHECK(ssd->get_tunable("target_latency") == "300ms");
    CHECK(ssd->get_tunable("quantum") == "8");
    CHECK(ssd->get_tunable("slice_async_rq") == "2");
    CHECK(ssd->get_tunable("back_seek_max") == "16384");
    CHECK(ssd->get_tunable("back_seek_penalty") == "2");
    CHECK(ssd->get_tunable("low_latency") == "1");

    // An explicit value always wins; bare numbers are ms as in sysfs.
    auto explicit_idle = make_cfq_sched(false, 32, {{"slice_idle", "8"}});
    CHECK(explicit_idle->get_tunable("slice_idle") == "8ms");
    CHECK(ssd->set_tunable("slice_idle", "100us", Time{}).empty());
    CHECK(ssd->get_tunable("slice_idle") == "100us");
    CHECK(ssd->set_tunable("slice_idle", "auto", Time{}).empty());
    CHECK(ssd->get_tunable("slice_idle") == "0");
    CHECK(ssd->set_tunable("back_seek_max", "1MiB", Time{}).empty());
    CHECK(ssd->get_tunable("back_seek_max") == "1024");
    // Kernel clamping: quantum >= 1.
    CHECK(ssd->set_tunable("quantum", "0", Time{}).empty());
    CHECK(ssd->get_tunable("quantum") == "1");
    CHECK_FALSE(ssd->set_tunable("quantum", "lots", Time{}).empty());
    CHECK_FALSE(ssd->set_tunable("slice_idle", "8 parsecs", Time{}).empty());
    CHECK_FALSE(ssd->set_tunable("no_such", "1", Time{}).empty());
    CHECK(ssd->get_tunable("quantum") == "1");

    std::string error;
    CHECK(make_scheduler("cfq", DeviceTraits{}, {{"bogus", "1"}}, error) == nullptr);
    CHECK_FALSE(error.empty());
}

TEST_CASE("cfq: conservation and depth limit under a mixed load") {
    for (bool rotational : {false, true}) {
        CAPTURE(rotational);
        const unsigned depth = rotational ? 4 : 16;
        Rig rig(make_cfq_sched(rotational, depth),
                rotational ? simple_disk() : fixed_latency(200us, 8), depth);
        rig.sched().set_group(1, 1000);
        rig.sched().set_group(2, 100);
        rig.sched().set_group(3, 300);
        QueueId q = 1;
        for (GroupId g = 1; g <= 3; ++g) {
            rig.add_job({q++, g, Op::read, true, true, 65536, g * (1ull << 30), 1ull << 28, 1, {}});
            rig.add_job({q++, g, Op::read, true, false, 4096, g * (1ull << 30), 1ull << 28, 8, 100us});
            rig.add_job({q++, g, Op::write, false, true, 16384, g * (1ull << 30) + (1ull << 29), 1ull << 28, 16, {}});
            rig.add_job({q++, g, Op::write, true, false, 8192, g * (1ull << 30), 1ull << 28, 2, 2ms});
        }
        rig.run_until(Time(2s));
        CHECK(rig.submitted() > 500);
        CHECK(rig.max_seen_depth() <= depth);
        rig.finish();
        auto st = rig.sched().stats(rig.now());
        CHECK(st.device.dispatched == rig.submitted());
        CHECK(st.device.completed == rig.submitted());
        std::uint64_t sum = 0;
        for (auto& [id, g] : st.groups) sum += g.completed;
        CHECK(sum == rig.submitted());
        CHECK(st.groups.at(1).weight == 1000);
    }
}

TEST_CASE("cfq: closing a queue with requests pending loses nothing") {
    Rig rig(make_cfq_sched(true, 2), simple_disk(), 2);
    rig.add_job({1, 0, Op::read, true, false, 4096, 0, 1ull << 30, 8, {}});
    rig.add_job({2, 0, Op::read, true, true, 4096, 1ull << 31, 1ull << 30, 1, {}});
    rig.run_until(Time(300ms));
    rig.sched().close_queue(1, rig.now());
    rig.finish();
}

TEST_CASE("cfq: a client moving to another group keeps its requests") {
    Rig rig(make_cfq_sched(false, 8), fixed_latency(300us, 8), 8);
    rig.sched().set_group(1, 100);
    rig.sched().set_group(2, 100);
    rig.add_job({1, 1, Op::read, true, false, 4096, 0, 1ull << 30, 8, {}});
    rig.add_job({2, 1, Op::read, true, true, 65536, 1ull << 31, 1ull << 30, 2, {}});
    rig.run_until(Time(300ms));
    CHECK(rig.sched().queued() + rig.sched().in_flight() > 0);
    rig.sched().open_queue(1, 2, rig.now());   // requests queued/in flight stay in group 1
    rig.run_until(Time(600ms));
    auto st = rig.sched().stats(rig.now());
    CHECK(st.groups.at(2).completed > 100);
    rig.finish();
}

TEST_CASE("cfq: FIFO expiry rescues a request the elevator would starve") {
    // One queue: a sequential stream far ahead keeps the one-way elevator
    // busy, and a second stream of the same client reads far behind the head
    // (beyond back_seek_max): only the FIFO gets those out. The FIFO is
    // checked once per slice, so the bound is fifo_expire_sync + a slice.
    auto run = [](const char* fifo_expire) {
        Rig rig(make_cfq_sched(true, 1, {{"fifo_expire_sync", fifo_expire}}), simple_disk(), 1);
        rig.add_job({1, 0, Op::read, true, true, 65536, 1ull << 32, 1ull << 32, 4, {}});
        rig.add_job({1, 0, Op::read, true, false, 4096, 0, 1ull << 29, 1, 50ms});
        rig.run_until(Time(5s));
        rig.finish();
        return rig.result(1);
    };
    const JobResult with_fifo = run("125ms");
    CHECK(with_fifo.completed > 10);
    CHECK(with_fifo.max_wait <= 125ms + 100ms + 20ms);
    const JobResult without = run("60s");
    CHECK(without.max_wait > 1s);
}

TEST_CASE("cfq: no queue starves past fifo_expire + target_latency") {
    // (As in the kernel, a sync request preempts an async slice, so a client
    // with think time between sync reads can still starve async writers;
    // that case is left out here on purpose, see docs/schedulers-cfq.md.)
    Rig rig(make_cfq_sched(true, 1), simple_disk(), 1);
    rig.add_job({1, 0, Op::read, true, false, 4096, 0, 1ull << 34, 4, {}});
    rig.add_job({2, 0, Op::read, true, true, 65536, 1ull << 35, 1ull << 30, 1, {}});
    rig.add_job({3, 0, Op::write, false, true, 65536, 1ull << 36, 1ull << 30, 4, {}});
    rig.run_until(Time(10s));
    rig.finish();
    for (std::size_t j = 0; j < 3; ++j) {
        CAPTURE(j);
        CHECK(rig.result(j).completed > 50);
        CHECK(rig.result(j).max_wait <= 250ms + 300ms);
    }
}

TEST_CASE("cfq: hw_tag detects a queueing device and a non-queueing one") {
    Rig deep(make_cfq_sched(false, 32), fixed_latency(100us, 32), 32);
    for (QueueId q = 1; q <= 4; ++q) deep.add_job({q, 0, Op::read, true, false, 4096, 0, 1ull << 30, 16, {}});
    deep.run_until(Time(1s));
    CHECK(deep.sched().stats(deep.now()).hw_tag);

    Rig shallow(make_cfq_sched(false, 2), fixed_latency(100us, 2), 2);
    for (QueueId q = 1; q <= 4; ++q) shallow.add_job({q, 0, Op::read, true, false, 4096, 0, 1ull << 30, 16, {}});
    shallow.run_until(Time(1s));
    CHECK_FALSE(shallow.sched().stats(shallow.now()).hw_tag);
}

TEST_CASE("cfq: long slices are not cut short by overflowing slice arithmetic") {
    // Two sequential readers in one group, slice_idle 1 s: low_latency scales
    // their slices down to fit target_latency, but not below
    // 2 * slice_idle * slice / slice_sync = 2 s. The product slice_idle x
    // slice_sync is 5 * 10^18 ns^2 at 5 s, past int64.
    for (const char* sync : {"4s", "5s", "10s"}) {
        Rig rig(make_cfq_sched(true, 1, {{"slice_idle", "1s"}, {"slice_sync", sync}}), fixed_latency(1ms, 1), 1);
        auto a = rig.add_job({1, 1, Op::read, true, true, 4096, 0, 1ull << 30, 1, {}});
        auto b = rig.add_job({2, 1, Op::read, true, true, 4096, 1ull << 33, 1ull << 30, 1, {}});
        rig.run_until(Time(30s));
        const SchedulerStats st = rig.sched().stats(rig.now());
        MESSAGE("slice_sync " << std::string(sync) << ": max wait " << rig.result(a).max_wait.count() / 1e6 << " / "
                              << rig.result(b).max_wait.count() / 1e6 << " ms, slices "
                              << st.queues.at(1).slices << " + " << st.queues.at(2).slices);
        // A 2 s slice each, in turn: each waits about 2 s for the other.
        CHECK(rig.result(a).max_wait > 1900ms);
        CHECK(rig.result(b).max_wait > 1900ms);
        CHECK(st.queues.at(1).slices + st.queues.at(2).slices <= 16);
        rig.finish();
    }
}

TEST_CASE("cfq: groups charged slices longer than 2^40 ns are charged all of them") {
    // target_latency 1 h, weights 1000:100, both groups backlogged: group 1's
    // slices last about an hour, group 2's 5.45 min, and each costs its group
    // about the same vdisktime, so they take turns, a slice each. Group 1's
    // slice is past 2^40 ns (18 min), where charge << 24 wrapped; and
    // slice x group slice (ns^2) is past int64.
    Rig rig(make_cfq_sched(true, 1, {{"slice_idle", "1ms"}, {"slice_sync", "60min"}, {"target_latency", "60min"}}),
            fixed_latency(100ms, 1), 1);
    rig.sched().set_group(1, 1000);
    rig.sched().set_group(2, 100);
    auto a = rig.add_job({1, 1, Op::read, true, true, 4096, 0, 1ull << 30, 4, {}});
    auto b = rig.add_job({2, 2, Op::read, true, true, 4096, 1ull << 33, 1ull << 30, 4, {}});
    rig.run_until(Time(std::chrono::hours(10)));
    const double ratio = double(rig.result(a).bytes) / double(rig.result(b).bytes);
    const SchedulerStats st = rig.sched().stats(rig.now());
    MESSAGE("weights 1000:100, hour-long slices: ratio " << ratio << ", slices " << st.queues.at(1).slices << " + "
                                                         << st.queues.at(2).slices << ", max wait "
                                                         << rig.result(a).max_wait.count() / 1e9 << " / "
                                                         << rig.result(b).max_wait.count() / 1e9 << " s");
    CHECK(st.queues.at(1).slices <= st.queues.at(2).slices + 1);
    CHECK(rig.result(b).max_wait < std::chrono::minutes(61));
    CHECK(ratio > 9.0);
    CHECK(ratio < 13.0);
    rig.finish();
}
