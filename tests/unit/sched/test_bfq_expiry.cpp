// Why bfq ended each queue's turn (sched::Expiry), counted per queue, group
// and device, and the IO_bound mark a TOO_IDLE expiry takes away: known
// scenarios driven event by event, with the exact counts they produce.
#include "expiry_text.hpp"
#include "test_bfq_rig.hpp"

using namespace bfqtest;

namespace {

Request rd(RequestId id, std::uint64_t sector, QueueId q = 1, std::uint64_t sectors = 8) {
    return Request{.id = id, .queue = q, .offset = sector * 512, .length = sectors * 512};
}

}   // namespace

TEST_CASE("bfq expiry: a reader thinking longer than slice_idle is expired TOO_IDLE and loses IO_bound") {
    auto s = make(true, 1);   // a disk: slice_idle 8ms
    s->open_queue(1, 0, Time{});
    s->submit(rd(1, 8), Time{});
    REQUIRE(s->dispatch(Time{}));
    CHECK(s->stats(Time{}).queues.at(1).io_bound == true);   // a new queue starts IO_bound
    s->complete(1, Time{5ms});
    REQUIRE(s->next_wakeup() == Time{13ms});   // idling for its next request
    CHECK_FALSE(s->dispatch(Time{13ms}));      // none came: too idle
    SchedulerStats st = s->stats(Time{13ms});
    CHECK(expiry_text(st.queues.at(1)) == "too_idle 1");
    CHECK(expiry_text(st.groups.at(0)) == "too_idle 1");
    CHECK(expiry_text(st.device) == "too_idle 1");
    // It used 8 sectors of a 10922-sector budget: under 2/10, not I/O bound.
    CHECK(st.queues.at(1).io_bound == false);
    CHECK_FALSE(st.queues.at(1).idle_window.has_value());   // cfq's flag

    // Its next request, 15ms after the last: served, and no longer idled for.
    s->submit(rd(2, 16), Time{20ms});
    REQUIRE(s->dispatch(Time{20ms}));
    s->complete(2, Time{25ms});
    CHECK_FALSE(s->next_wakeup());
    st = s->stats(Time{25ms});
    CHECK(expiry_text(st.queues.at(1)) == "too_idle 1, no_more_requests 1");
    CHECK(st.queues.at(1).slices == 2);
    CHECK(st.queues.at(1).io_bound == false);
}

TEST_CASE("bfq expiry: a queue that uses its budget is BUDGET_EXHAUSTED, one that empties NO_MORE_REQUESTS") {
    auto s = make(false, 1, {{"group_idle", "0"}});   // flash, no idling at all
    s->open_queue(1, 0, Time{});
    for (RequestId id = 1; id <= 3000; ++id) s->submit(rd(id, id * 8), Time{});
    Time t{};
    while (auto r = s->dispatch(t)) {
        t += 10us;
        s->complete(r->id, t);
    }
    // A budget of 10922 sectors takes 1365 requests of 8; the rest (13080
    // sectors) fits the next budget of 16384 and the queue runs empty.
    const SchedulerStats st = s->stats(t);
    CHECK(expiry_text(st.queues.at(1)) == "budget_exhausted 1, no_more_requests 1");
    CHECK(expiry_text(st.device) == "budget_exhausted 1, no_more_requests 1");
    CHECK(st.queues.at(1).io_bound == true);
}

TEST_CASE("bfq expiry: slow queues are expired at timeout_sync (BUDGET_TIMEOUT)") {
    auto s = make(true, 1, {{"timeout_sync", "50ms"}});
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    RequestId id = 1;
    for (int i = 0; i < 100; ++i) s->submit(rd(id++, std::uint64_t(i) * 100000, 1), Time{});
    for (int i = 0; i < 100; ++i) s->submit(rd(id++, std::uint64_t(i) * 100000 + 7, 2), Time{});
    Time t{};
    for (int n = 0; n < 20; ++n) {
        auto r = s->dispatch(t);
        REQUIRE(r);
        t += 10ms;   // a seek each: five requests per 50ms budget
        s->complete(r->id, t);
    }
    const SchedulerStats st = s->stats(t);
    CHECK(expiry_text(st.queues.at(1)) == "budget_timeout 2");
    CHECK(expiry_text(st.queues.at(2)) == "budget_timeout 2");
    CHECK(expiry_text(st.groups.at(0)) == "budget_timeout 4");
}

TEST_CASE("bfq expiry: a heavier group's arrival ends a lighter one's turn (PREEMPTED)") {
    auto s = make(true, 32);
    s->set_group(1, 1000);
    s->set_group(2, 100);
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    RequestId next_id = 1;
    auto submit = [&](QueueId q, std::uint64_t offset, Time now) {
        s->submit(Request{.id = next_id++, .queue = q, .group = GroupId(q), .op = Op::write, .offset = offset, .length = 32768, .arrival = now},
                  now);
    };
    submit(1, 0, Time{});
    submit(2, 1ull << 36, Time{});
    auto h1 = s->dispatch(Time{});
    REQUIRE(h1);
    CHECK(h1->queue == 1);
    s->complete(h1->id, Time{1ms});
    auto l1 = s->dispatch(Time{20ms});   // heavy idled in vain until 9ms: too idle
    REQUIRE(l1);
    CHECK(l1->queue == 2);
    submit(1, 32768, Time{20ms});   // heavy returns and preempts light
    auto h2 = s->dispatch(Time{20ms});
    REQUIRE(h2);
    CHECK(h2->queue == 1);
    const SchedulerStats st = s->stats(Time{20ms});
    CHECK(expiry_text(st.queues.at(1)) == "too_idle 1");
    CHECK(expiry_text(st.queues.at(2)) == "preempted 1");
    CHECK(expiry_text(st.groups.at(1)) == "too_idle 1");
    CHECK(expiry_text(st.groups.at(2)) == "preempted 1");
    CHECK(expiry_text(st.device) == "too_idle 1, preempted 1");
}
