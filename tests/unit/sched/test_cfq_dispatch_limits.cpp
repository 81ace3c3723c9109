// CFQ's dispatch limits (cfq_may_dispatch in Linux 4.x), event by event on a
// queueing SSD: quantum/2 while other queues wait and the slice is new or
// used soon, quantum otherwise, and no limit for the only busy queue or the
// only busy sync queue (promote_sync).
#include "test_cfq_rig.hpp"

using namespace cfqtest;

namespace {

Request req(RequestId id, QueueId q, std::uint64_t offset, bool sync = true) {
    Request r;
    r.id = id;
    r.queue = q;
    r.offset = offset;
    r.length = 4096;
    r.sync = sync;
    r.op = sync ? Op::read : Op::write;
    return r;
}

// `n` random-looking reads (far apart) of queue `q`, ids from `first`.
void submit_burst(Scheduler& s, QueueId q, RequestId first, int n, Time now, bool sync = true) {
    for (int i = 0; i < n; ++i)
        s.submit(req(first + RequestId(i), q, (std::uint64_t(q) << 32) + std::uint64_t(i * 7 % n) * (1ull << 20), sync),
                 now);
}

std::vector<Request> drain(Scheduler& s, Time now) {
    std::vector<Request> out;
    while (auto r = s.dispatch(now)) out.push_back(*r);
    return out;
}

}   // namespace

TEST_CASE("cfq dispatch limits: the only busy queue dispatches without limit") {
    for (const char* idle : {"0", "8ms"}) {
        CAPTURE(idle);
        auto s = make_cfq_sched(false, 32, {{"slice_idle", idle}});
        submit_burst(*s, 1, 1, 20, Time{});
        CHECK(drain(*s, Time{}).size() == 20);   // busy_queues == 1: max_dispatch = -1
    }
}

TEST_CASE("cfq dispatch limits: with other queues waiting, quantum/2 then quantum") {
    for (const char* idle : {"0", "8ms"}) {
        CAPTURE(idle);
        auto s = make_cfq_sched(false, 32, {{"slice_idle", idle}});
        submit_burst(*s, 1, 1, 40, Time{});
        submit_burst(*s, 2, 101, 40, Time{});
        auto first = drain(*s, Time{});
        // The slice is new (no request completed yet): "used soon", so quantum/2.
        REQUIRE(first.size() == 4);
        for (const auto& r : first) CHECK(r.queue == first[0].queue);
        // The first completion starts the slice. It is not "used soon" while
        // now + slice_idle x dispatched stays before its end (always, with
        // slice_idle 0; early in the slice with 8ms): quantum (8) may be out.
        s->complete(first[0].id, Time(500us));
        auto more = drain(*s, Time(500us));
        CHECK(more.size() == 5);   // 3 still in flight + 5 = 8
        for (const auto& r : more) CHECK(r.queue == first[0].queue);
        CHECK(s->in_flight() == 8);
    }
}

TEST_CASE("cfq dispatch limits: the only busy sync queue is promoted past async queues") {
    auto s = make_cfq_sched(false, 32, {{"slice_idle", "0"}});
    submit_burst(*s, 1, 1, 20, Time{});
    submit_burst(*s, 2, 101, 20, Time{}, false);   // async writes: the group's async queue
    auto out = drain(*s, Time{});
    // busy_queues == 2 but busy_sync_queues == 1: promote_sync lifts the
    // limit for the sync queue; async waits while sync I/O is in flight.
    CHECK(out.size() == 20);
    for (const auto& r : out) CHECK(r.sync);
}

TEST_CASE("cfq dispatch limits: with slice_idle 0 an emptied queue leaves, and a burst after it has no limit") {
    auto s = make_cfq_sched(false, 32, {{"slice_idle", "0"}, {"group_idle", "0"}});
    submit_burst(*s, 1, 1, 3, Time{});
    CHECK(drain(*s, Time{}).size() == 3);   // alone: no limit
    // Queue 1 is empty with its reads still at the device; queue 2's burst
    // lands. The next dispatch expires queue 1 (no idling), which leaves the
    // busy count: queue 2 is then the only busy queue.
    submit_burst(*s, 2, 101, 20, Time(100us));
    auto burst = drain(*s, Time(100us));
    CHECK(burst.size() == 20);
    CHECK(s->in_flight() == 23);
    // The same with a third queue waiting: the limit is back.
    auto t = make_cfq_sched(false, 32, {{"slice_idle", "0"}, {"group_idle", "0"}});
    submit_burst(*t, 1, 1, 3, Time{});
    CHECK(drain(*t, Time{}).size() == 3);
    submit_burst(*t, 2, 101, 20, Time(100us));
    submit_burst(*t, 3, 201, 20, Time(100us));
    CHECK(drain(*t, Time(100us)).size() == 4);
}
