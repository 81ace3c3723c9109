// Why cfq ended each queue's slice (sched::Expiry), counted per queue, group
// and device, and the idle window flag: known scenarios driven event by
// event, with the exact counts they produce.
#include "expiry_text.hpp"
#include "test_cfq_rig.hpp"

using namespace cfqtest;

namespace {

Request read_at(RequestId id, QueueId q, std::uint64_t offset, std::uint64_t len = 65536) {
    return Request{.id = id, .queue = q, .offset = offset, .length = len};
}

}   // namespace

TEST_CASE("cfq expiry: two backlogged readers end every slice SLICE_USED") {
    // 20ms slices (low_latency off: no scaling); a slice starts at its first
    // completion, so at 10ms a request each queue gets three: 30ms a turn.
    auto s = make_cfq_sched(true, 1, {{"slice_sync", "20ms"}, {"low_latency", "0"}});
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    RequestId id = 1;
    for (std::uint64_t i = 0; i < 50; ++i) s->submit(read_at(id++, 1, i * 65536), Time{});
    for (std::uint64_t i = 0; i < 50; ++i) s->submit(read_at(id++, 2, (1ull << 30) + i * 65536), Time{});
    Time t{};
    std::vector<QueueId> order;
    while (order.size() < 30) {
        auto r = s->dispatch(t);
        REQUIRE(r);
        order.push_back(r->queue);
        s->complete(r->id, t += 10ms);
    }
    CHECK(order == std::vector<QueueId>{1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1,
                                        2, 2, 2, 1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2});
    const SchedulerStats st = s->stats(t);
    CHECK(expiry_text(st.queues.at(1)) == "slice_used 5");
    CHECK(expiry_text(st.queues.at(2)) == "slice_used 5");
    CHECK(expiry_text(st.groups.at(0)) == "slice_used 10");
    CHECK(expiry_text(st.device) == "slice_used 10");
    CHECK(st.queues.at(1).idle_window == true);          // sequential, never idle long
    CHECK_FALSE(st.queues.at(1).io_bound.has_value());   // bfq's flag
}

TEST_CASE("cfq expiry: a sync read PREEMPTS an async slice, then idles in vain (TOO_IDLE)") {
    auto s = make_cfq_sched(true, 1);
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    Request w1 = read_at(1, 1, 0), w2 = read_at(2, 1, 65536);
    w1.op = w2.op = Op::write;
    w1.sync = w2.sync = false;
    s->submit(w1, Time{});
    s->submit(w2, Time{});
    REQUIRE(s->dispatch(Time{}));
    s->submit(read_at(3, 2, 1ull << 30), Time(1ms));
    s->complete(1, Time(2ms));
    auto r = s->dispatch(Time(2ms));   // the reader preempted the group's async queue
    REQUIRE(r);
    CHECK(r->id == 3);
    s->complete(3, Time(3ms));
    CHECK(s->next_wakeup() == Time(11ms));   // idling for the reader
    r = s->dispatch(Time(11ms));             // which did not come back
    REQUIRE(r);
    CHECK(r->id == 2);
    const SchedulerStats st = s->stats(Time(11ms));
    CHECK(expiry_text(st.device) == "too_idle 1, preempted 1");
    CHECK(expiry_text(st.groups.at(0)) == "too_idle 1, preempted 1");
    CHECK(expiry_text(st.queues.at(2)) == "too_idle 1");
    // The async queue is the group's, shared by its clients: its slices
    // count for the group and the device only.
    CHECK(expiry_text(st.queues.at(1)).empty());
    CHECK(st.queues.at(2).idle_window == true);
}

TEST_CASE("cfq expiry: an emptied queue not idled for ends NO_MORE_REQUESTS; a closed one CLOSED") {
    auto s = make_cfq_sched(false, 32, {{"slice_idle", "0"}, {"group_idle", "0"}});
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    s->submit(read_at(1, 1, 0), Time{});
    s->submit(read_at(2, 2, 1ull << 30), Time{});
    auto r = s->dispatch(Time{});
    REQUIRE(r);
    CHECK(r->queue == 1);
    s->complete(r->id, Time(1ms));
    r = s->dispatch(Time(1ms));   // queue 1 is empty and not idled for
    REQUIRE(r);
    CHECK(r->queue == 2);
    s->complete(r->id, Time(2ms));
    s->close_queue(2, Time(3ms));   // in service when its client goes away
    const SchedulerStats st = s->stats(Time(3ms));
    CHECK(expiry_text(st.queues.at(1)) == "no_more_requests 1");
    CHECK(expiry_text(st.groups.at(0)) == "no_more_requests 1, closed 1");
    CHECK(expiry_text(st.device) == "no_more_requests 1, closed 1");
    CHECK(st.queues.at(1).idle_window == false);   // slice_idle 0
}
