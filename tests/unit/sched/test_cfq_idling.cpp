// CFQ idling, event by event: when the idle timer is armed, for how long,
// what ends it (seed-003 fix: group idle on a non-rotational queueing device).
#include "test_cfq_rig.hpp"

using namespace cfqtest;

namespace {

Request read_at(RequestId id, QueueId q, GroupId g, std::uint64_t offset, std::uint64_t len = 65536) {
    Request r;
    r.id = id;
    r.queue = q;
    r.group = g;
    r.offset = offset;
    r.length = len;
    return r;
}

std::vector<RequestId> drain(Scheduler& s, Time now) {
    std::vector<RequestId> ids;
    while (auto r = s.dispatch(now)) ids.push_back(r->id);
    return ids;
}

}   // namespace

TEST_CASE("cfq idling: a sequential reader on a disk keeps the device for slice_idle") {
    for (bool comes_back : {true, false}) {
        CAPTURE(comes_back);
        auto s = make_cfq_sched(true, 1);
        s->open_queue(1, 0, Time{});
        s->open_queue(2, 0, Time{});
        s->submit(read_at(1, 1, 0, 0), Time{});
        s->submit(read_at(2, 2, 0, 1ull << 30), Time{});
        CHECK(drain(*s, Time{}) == std::vector<RequestId>{1});
        s->complete(1, Time(1ms));
        // Queue 1 is empty, its request done: idle 8ms for its next one.
        CHECK(s->next_wakeup() == Time(9ms));
        CHECK(s->stats(Time(1ms)).idling);
        CHECK(drain(*s, Time(1ms)).empty());
        if (comes_back) {
            s->submit(read_at(3, 1, 0, 65536), Time(3ms));
            CHECK_FALSE(s->next_wakeup());
            CHECK(drain(*s, Time(3ms)) == std::vector<RequestId>{3});
            CHECK(s->stats(Time(3ms)).device.idle_time == 2ms);
        } else {
            CHECK(drain(*s, Time(8ms)).empty());
            // The timer fires at 9ms: the slice ends, queue 2 gets the disk.
            CHECK(drain(*s, Time(9ms)) == std::vector<RequestId>{2});
            CHECK(s->stats(Time(9ms)).device.idle_time == 8ms);
            CHECK(s->stats(Time(9ms)).queues.at(1).idle_time == 8ms);
        }
    }
}

TEST_CASE("cfq idling: slice_idle 0 on a disk switches queues at once") {
    auto s = make_cfq_sched(true, 1, {{"slice_idle", "0"}, {"group_idle", "0"}});
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    s->submit(read_at(1, 1, 0, 0), Time{});
    s->submit(read_at(2, 2, 0, 1ull << 30), Time{});
    CHECK(drain(*s, Time{}).size() == 1);
    s->complete(1, Time(1ms));
    CHECK_FALSE(s->next_wakeup());
    CHECK(drain(*s, Time(1ms)) == std::vector<RequestId>{2});
}

TEST_CASE("cfq idling: seed-003 fix arms group idle on a non-rotational queueing device") {
    for (const char* group_idle : {"8ms", "0"}) {
        CAPTURE(group_idle);
        const bool idles = std::string(group_idle) != "0";
        // slice_idle auto = 0 on flash; hw_tag is still unknown, which counts
        // as a queueing device.
        auto s = make_cfq_sched(false, 32, {{"group_idle", group_idle}});
        CHECK(s->get_tunable("slice_idle") == "0");
        s->set_group(1, 1000);
        s->set_group(2, 100);
        s->open_queue(1, 1, Time{});
        s->open_queue(2, 2, Time{});
        s->submit(read_at(1, 1, 1, 0), Time{});
        s->submit(read_at(2, 2, 2, 1ull << 30), Time{});
        auto first = drain(*s, Time{});
        CHECK(s->stats(Time{}).hw_tag);
        if (idles) {
            // Group 1 waits for its in-flight request rather than yield.
            CHECK(first == std::vector<RequestId>{1});
            s->complete(1, Time(1ms));
            CHECK(s->next_wakeup() == Time(9ms));
            CHECK(drain(*s, Time(1ms)).empty());
            s->submit(read_at(3, 1, 1, 65536), Time(1ms));
            CHECK(drain(*s, Time(1ms)) == std::vector<RequestId>{3});
        } else {
            // Pre-fix behaviour and group_idle 0: no idling at all, both go.
            CHECK(first == std::vector<RequestId>{1, 2});
            s->complete(1, Time(1ms));
            CHECK_FALSE(s->next_wakeup());
        }
    }
}

TEST_CASE("cfq idling: the group-idle timer expiring hands the device to the other group") {
    auto s = make_cfq_sched(false, 32);
    s->set_group(1, 1000);
    s->set_group(2, 100);
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    s->submit(read_at(1, 1, 1, 0), Time{});
    s->submit(read_at(2, 2, 2, 1ull << 30), Time{});
    CHECK(drain(*s, Time{}) == std::vector<RequestId>{1});
    s->complete(1, Time(1ms));
    CHECK(drain(*s, Time(5ms)).empty());
    CHECK(drain(*s, Time(9ms)) == std::vector<RequestId>{2});
    auto st = s->stats(Time(9ms));
    CHECK(st.groups.at(1).idle_time == 8ms);
    CHECK(st.groups.at(1).slices == 1);
    CHECK(st.groups.at(2).slices == 1);
}

TEST_CASE("cfq preemption: a sync request ends an async slice") {
    auto s = make_cfq_sched(true, 1);
    s->open_queue(1, 0, Time{});
    s->open_queue(2, 0, Time{});
    Request w1 = read_at(1, 1, 0, 0), w2 = read_at(2, 1, 0, 65536);
    w1.op = w2.op = Op::write;
    w1.sync = w2.sync = false;
    s->submit(w1, Time{});
    s->submit(w2, Time{});
    CHECK(drain(*s, Time{}) == std::vector<RequestId>{1});
    s->submit(read_at(3, 2, 0, 1ull << 30), Time(1ms));
    CHECK(drain(*s, Time(1ms)).empty());   // depth 1: w1 still at the device
    s->complete(1, Time(2ms));
    // Without preemption the async queue would go on with w2 (same slice).
    CHECK(drain(*s, Time(2ms)) == std::vector<RequestId>{3});
    s->complete(3, Time(3ms));
    // The reader idles for its next request; then the writer resumes.
    CHECK(s->next_wakeup() == Time(11ms));
    CHECK(drain(*s, Time(11ms)) == std::vector<RequestId>{2});
}

TEST_CASE("cfq preemption: never across groups for sync requests") {
    auto s = make_cfq_sched(true, 1);
    s->set_group(1, 100);
    s->set_group(2, 1000);
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    s->submit(read_at(1, 1, 1, 0), Time{});
    CHECK(drain(*s, Time{}) == std::vector<RequestId>{1});
    s->submit(read_at(2, 2, 2, 1ull << 30), Time(1ms));
    s->complete(1, Time(2ms));
    // Group 1 idles for its reader (the heavier group 2 waits its turn).
    CHECK(s->next_wakeup() == Time(10ms));
    s->submit(read_at(3, 1, 1, 65536), Time(3ms));
    CHECK(drain(*s, Time(3ms)) == std::vector<RequestId>{3});
}
