// Why bfq ended each queue's turn (sched::Expiry), counted per queue, group
// and device, and the IO_bound mark a TOO_IDLE expiry takes away: known
// scenarios driven event by event, with the exact counts they produce.
// (BUDGET_TIMEOUT: test_bfq_budget.cpp; PREEMPTED: test_bfq_share.cpp.)
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
