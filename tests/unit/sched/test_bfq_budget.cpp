// BFQ budgets, elevator, FIFO, device detection: driven event by event.
#include "expiry_text.hpp"
#include "test_bfq_rig.hpp"

#include "sched/bfq/scheduler.hpp"

using namespace bfqtest;
using nbdsched::sched::bfq::BfqScheduler;

namespace {

BfqScheduler& as_bfq(Scheduler& s) { return dynamic_cast<BfqScheduler&>(s); }

Request rd(RequestId id, std::uint64_t sector, QueueId q = 1, std::uint64_t sectors = 8) {
    return Request{.id = id, .queue = q, .offset = sector * 512, .length = sectors * 512};
}

}   // namespace

TEST_CASE("bfq budget: exhausted budgets grow x4 up to max_budget") {
    auto s = make(false, 1, {{"group_idle", "0"}});
    s->open_queue(1, 0, Time{});
    for (RequestId id = 1; id <= 3000; ++id) s->submit(rd(id, id * 8), Time{});
    CHECK(*as_bfq(*s).queue_max_budget(1, true) == 16384 * 2 / 3);   // bfq_init_bfqq
    std::uint64_t first_slice = 0;
    std::uint64_t second_budget = 0;
    Time t{};
    while (s->queued() > 0) {
        auto r = s->dispatch(t);
        REQUIRE(r);
        auto slices = s->stats(t).queues[1].slices;
        if (slices == 1) ++first_slice;
        if (slices == 2 && !second_budget) second_budget = *as_bfq(*s).queue_max_budget(1, true);
        t += 10us;
        s->complete(r->id, t);
    }
    CHECK(first_slice == 10922 / 8);   // the budget, in sectors
    CHECK(second_budget == 16384);     // min(4 * b, max_budget)
    // 24000 - 10920 sectors were left for the second budget, and then the
    // queue ran empty: it keeps what it used.
    CHECK(*as_bfq(*s).queue_max_budget(1, true) == 24000 - 10920);
}

TEST_CASE("bfq budget: an emptied queue keeps what it used (NO_MORE_REQUESTS)") {
    auto s = make(false, 4, {{"group_idle", "0"}});
    s->open_queue(1, 0, Time{});
    for (RequestId id = 1; id <= 10; ++id) s->submit(rd(id, id * 8), Time{});
    Time t{};
    std::vector<RequestId> out;
    while (out.size() < 10) {
        while (auto r = s->dispatch(t)) out.push_back(r->id);
        t += 100us;
        for (RequestId id : out) s->complete(id, t);
    }
    CHECK(*as_bfq(*s).queue_max_budget(1, true) == 16384 / 32);   // max(80 used, min)
}

TEST_CASE("bfq budget: the idle timer shrinks the budget (TOO_IDLE)") {
    // Disk: slice_idle auto = 8ms. strict_guarantees makes BFQ idle for a
    // lone new queue (one group is not an asymmetric scenario, and the queue
    // is not yet known to be I/O-bound).
    auto s = make(true, 1, {{"strict_guarantees", "1"}});
    s->open_queue(1, 0, Time{});
    s->submit(rd(1, 8), Time{});
    auto r = s->dispatch(Time{});
    REQUIRE(r);
    s->complete(r->id, Time{5ms});
    auto wake = s->next_wakeup();
    REQUIRE(wake);
    CHECK(*wake == Time{13ms});
    CHECK(s->stats(Time{9ms}).idling);
    CHECK(!s->dispatch(*wake));
    CHECK(!s->next_wakeup());
    CHECK(*as_bfq(*s).queue_max_budget(1, true) == 10922 - 4 * 512);
    CHECK(s->stats(*wake).queues[1].idle_time == 8ms);
}

TEST_CASE("bfq budget: a slow queue is expired at timeout_sync and charged for time") {
    auto s = make(true, 1, {{"timeout_sync", "50ms"}});
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    RequestId id = 1;
    for (int i = 0; i < 100; ++i) s->submit(rd(id++, std::uint64_t(i) * 100000, 1), Time{});
    for (int i = 0; i < 100; ++i) s->submit(rd(id++, std::uint64_t(i) * 100000 + 7, 2), Time{});
    Time t{};
    std::vector<QueueId> order;
    for (int n = 0; n < 20; ++n) {
        auto r = s->dispatch(t);
        REQUIRE(r);
        order.push_back(r->queue);
        t += 10ms;   // a seek each
        s->complete(r->id, t);
    }
    // 50ms budget timeout at 10ms per request: five requests, then switch.
    std::vector<QueueId> expect = {1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2};
    CHECK(order == expect);
    const SchedulerStats st = s->stats(t);   // each turn ended BUDGET_TIMEOUT
    CHECK(expiry_text(st.queues.at(1)) == "budget_timeout 2");
    CHECK(expiry_text(st.queues.at(2)) == "budget_timeout 2");
    CHECK(expiry_text(st.groups.at(0)) == "budget_timeout 4");
}

TEST_CASE("bfq elevator: forward first, short backward seeks at back_seek_penalty") {
    auto s = make(false, 1, {{"group_idle", "0"}});
    s->open_queue(1, 0, Time{});
    s->submit(rd(1, 1000), Time{});
    auto r = s->dispatch(Time{});   // head is now at sector 1008
    REQUIRE(r);
    s->submit(rd(2, 1050), Time{});   // 42 ahead
    s->submit(rd(3, 990), Time{});    // 18 behind: costs 36 < 42
    s->submit(rd(4, 100), Time{});    // far behind
    s->complete(1, Time{1ms});
    std::vector<RequestId> order;
    Time t{1ms};
    while (auto n = s->dispatch(t)) {
        order.push_back(n->id);
        t += 1ms;
        s->complete(n->id, t);
    }
    CHECK(order == std::vector<RequestId>{3, 2, 4});
    CHECK(s->set_tunable("back_seek_penalty", "3", t).empty());
}

TEST_CASE("bfq fifo: an expired request jumps the elevator once per budget") {
    auto s = make(false, 1, {{"group_idle", "0"}});
    s->open_queue(1, 0, Time{});
    s->submit(rd(1, 5'000'000), Time{});
    s->submit(rd(2, 8), Time{200ms});
    auto r = s->dispatch(Time{200ms});
    REQUIRE(r);
    CHECK(r->id == 1);   // waited 200ms > fifo_expire_sync 125ms

    auto s2 = make(false, 1, {{"group_idle", "0"}});
    s2->open_queue(1, 0, Time{});
    s2->submit(rd(1, 5'000'000), Time{});
    s2->submit(rd(2, 8), Time{});
    r = s2->dispatch(Time{1ms});
    REQUIRE(r);
    CHECK(r->id == 2);   // nothing expired: nearest ahead of the head
}

TEST_CASE("bfq hw_tag: detected on a deep device, not on a shallow one") {
    for (unsigned depth : {32u, 2u}) {
        Rig rig(make(false, depth), FakeDevice{4, 100us, 100us}, depth);
        for (QueueId q = 1; q <= 8; ++q)
            rig.add(Job{.queue = q, .group = 1, .iodepth = 4, .region = q << 32});
        rig.run(Time{200ms});
        CHECK(as_bfq(rig.sched()).hw_tag() == (depth > 3 ? 1 : 0));
        CHECK(rig.sched().stats(rig.now()).hw_tag == (depth > 3));
    }
}

TEST_CASE("bfq max_budget auto follows the peak rate") {
    // Sequential 4k reads, 4 channels x 100us: 320 sectors/ms, so
    // peak_rate * 125ms is about 40000 sectors.
    Rig rig(make(false, 32), FakeDevice{4, 100us, 100us}, 32);
    rig.add(Job{.queue = 1, .sequential = true, .iodepth = 8});
    CHECK(as_bfq(rig.sched()).current_max_budget() == 16384);
    rig.run(Time{3s});
    auto mb = as_bfq(rig.sched()).current_max_budget();
    MESSAGE("auto max_budget " << mb);
    CHECK(mb > 30000);
    CHECK(mb < 50000);
    CHECK(rig.sched().set_tunable("max_budget", "2048", rig.now()).empty());
    CHECK(as_bfq(rig.sched()).current_max_budget() == 2048);
}

TEST_CASE("bfq async writes are charged 3x against sync reads in one group") {
    // A fixed max_budget keeps budget sizes steady while the shares settle.
    Rig rig(make(false, 4, {{"group_idle", "0"}, {"max_budget", "4096"}}),
            FakeDevice{1, 100us, 100us}, 4);
    // Sequential on both sides, so neither is "slow" and charged for time.
    rig.add(Job{.queue = 1, .group = 1, .sequential = true, .iodepth = 8, .region = 1ull << 32});
    rig.add(Job{.queue = 2, .group = 1, .sync = false, .op = Op::write, .sequential = true, .iodepth = 8, .region = 2ull << 32});
    rig.run(Time{1s});
    rig.reset_counts();
    rig.run(Time{11s});
    double ratio = double(rig.jobs()[0].bytes) / double(rig.jobs()[1].bytes);
    MESSAGE("sync:async service " << ratio);
    CHECK(ratio > 2.7);
    CHECK(ratio < 3.3);
}

TEST_CASE("bfq re-weighting a group at run time moves the share") {
    Rig rig(make(false, 32), FakeDevice{4, 100us, 100us}, 32);
    for (QueueId q = 1; q <= 2; ++q)
        rig.add(Job{.queue = q, .group = GroupId(q), .iodepth = 2, .region = q << 32});
    rig.sched().set_group(1, 100);
    rig.sched().set_group(2, 100);
    rig.run(Time{2s});
    rig.sched().set_group(1, 400);
    rig.run(Time{3s});
    rig.reset_counts();
    rig.run(Time{13s});
    double ratio = double(rig.jobs()[0].bytes) / double(rig.jobs()[1].bytes);
    MESSAGE("after re-weighting to 400:100: " << ratio);
    CHECK(ratio > 3.6);
    CHECK(ratio < 4.4);
    CHECK(rig.sched().stats(rig.now()).groups[1].weight == 400);
}
