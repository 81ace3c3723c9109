// The QoS layer (sched/qos) driven by hand in virtual time: pass-through,
// the limit's exact rate and burst, the floor ahead of the policy, the
// protectors' depth cap, and request conservation.
#include <doctest/doctest.h>

#include <deque>
#include <set>

#include "test_request.hpp"
#include "sched/qos/qos_scheduler.hpp"

using namespace nbdsched;
using namespace nbdsched::sched;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<qos::QosScheduler> make(const std::string& policy, unsigned depth) {
    std::string error;
    DeviceTraits traits{false, depth};
    auto inner = make_scheduler(policy, traits, {}, error);
    REQUIRE_MESSAGE(inner, error);
    return qos::with_qos(std::move(inner), traits);
}

}   // namespace

TEST_CASE("qos layer: no settings, every call passes through in order") {
    auto s = make("none", 2);
    s->open_queue(1, 1, Time{});
    for (RequestId i = 0; i < 4; ++i) s->submit(test::make_request(i, 1, 1), Time{});
    CHECK(s->queued() == 4);
    CHECK(s->dispatch(Time{})->id == 0);
    CHECK(s->dispatch(Time{})->id == 1);
    CHECK_FALSE(s->dispatch(Time{}));   // depth 2
    CHECK(s->in_flight() == 2);
    s->complete(0, Time{1ms});
    CHECK(s->dispatch(Time{1ms})->id == 2);
    CHECK(s->stats(Time{1ms}).qos.empty());
}

TEST_CASE("qos layer: a limit lets through its burst, then exactly its rate") {
    auto s = make("none", 32);
    qos::GroupQos q;
    q.limit.iops = 100;   // burst 100 ms: 10 requests
    REQUIRE(s->set_qos(1, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    for (RequestId i = 0; i < 40; ++i) s->submit(test::make_request(i, 1, 1), Time{});
    unsigned got = 0;
    while (auto r = s->dispatch(Time{})) s->complete(r->id, Time{}), ++got;
    CHECK(got == 10);
    REQUIRE(s->next_wakeup());
    CHECK(*s->next_wakeup() == Time{10ms});   // one token per 10 ms
    Time now{};
    while (auto w = s->next_wakeup()) {
        now = *w;
        if (now > Time{200ms}) break;
        while (auto r = s->dispatch(now)) s->complete(r->id, now), ++got;
    }
    CHECK(got == 30);   // 10 at once + 20 in 200 ms
    auto st = s->stats(now).qos.at(1);
    CHECK(st.limit_delayed == 30);
    CHECK(st.throttled_time >= 190ms);
}

TEST_CASE("qos layer: a group below its floor is dispatched ahead of the policy's FIFO") {
    auto s = make("none", 1);
    qos::GroupQos q;
    q.reserve.iops = 10;
    REQUIRE(s->set_qos(2, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    for (RequestId i = 0; i < 8; ++i) s->submit(test::make_request(i, 1, 1), Time{});   // greedy, first in line
    for (RequestId i = 100; i < 103; ++i) s->submit(test::make_request(i, 2, 2), Time{1ms});
    // Its credit (a new reservation starts full: two requests) covers two
    // requests: ahead of eight older ones.
    for (RequestId want : {100, 101}) {
        auto r = s->dispatch(Time{1ms});
        REQUIRE(r);
        CHECK(r->id == want);
        s->complete(r->id, Time{2ms});
    }
    auto r = s->dispatch(Time{2ms});
    REQUIRE(r);
    CHECK(r->group == 1);   // no credit left: the policy's turn (102 waits in it behind the greedy ones)
    auto st = s->stats(Time{2ms});
    CHECK(st.qos.at(2).reserved_dispatches == 2);
    CHECK(st.groups.at(2).dispatched == 2);   // the floor's dispatches are counted for the group
}

TEST_CASE("qos layer: a latency target caps other groups' outstanding requests while it misses") {
    auto s = make("none", 32);
    qos::GroupQos q;
    q.latency_target = 25ms;   // window 100 ms
    REQUIRE(s->set_qos(1, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    RequestId next = 0;
    Time now{};
    std::set<RequestId> at_device;
    // Every request takes 10 ms at a device serving in order; a greedy group keeps 32 outstanding.
    for (int i = 0; i < 32; ++i) s->submit(test::make_request(next++, 2, 2), now);
    s->submit(test::make_request(next++, 1, 1), now);
    std::deque<RequestId> fifo;
    for (int step = 0; step < 400; ++step) {
        while (auto r = s->dispatch(now)) fifo.push_back(r->id);
        now += 10ms;
        if (fifo.empty()) continue;
        RequestId done = fifo.front();
        fifo.pop_front();
        bool protected_group = done >= 1'000'000 || done == 32;
        s->complete(done, now);
        if (protected_group) s->submit(test::make_request(1'000'000 + next++, 1, 1), now);
        else s->submit(test::make_request(next++, 2, 2), now);
    }
    auto st = s->stats(now).qos.at(1);
    CHECK(st.latency_misses > 0);
    CHECK(st.depth_cap < 32);
    CHECK(st.last_p90 <= 50ms);
}

TEST_CASE("qos layer: while a latency target misses, other groups wait at the gate behind its queued request") {
    auto s = make("none", 2);
    qos::GroupQos q;
    q.latency_target = 25ms;   // window 100 ms
    REQUIRE(s->set_qos(1, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    using test::make_request;
    // A miss: the reader's request waits 50 ms behind two of the other group's.
    s->submit(make_request(0, 2, 2), Time{});
    s->submit(make_request(1, 2, 2), Time{});
    s->submit(make_request(2, 1, 1), Time{});
    CHECK(s->dispatch(Time{})->id == 0);
    CHECK(s->dispatch(Time{})->id == 1);
    CHECK_FALSE(s->dispatch(Time{}));
    s->complete(0, Time{50ms});
    CHECK(s->dispatch(Time{50ms})->id == 2);
    s->complete(1, Time{60ms});
    s->complete(2, Time{60ms});
    // After the window: the reader fills the device and has one more waiting in the policy.
    Time now{110ms};
    for (RequestId id : {10, 11, 12}) s->submit(make_request(id, 1, 1), now);
    REQUIRE(s->stats(now).qos.at(1).latency_misses == 1);
    CHECK(s->dispatch(now)->id == 10);
    CHECK(s->dispatch(now)->id == 11);
    // The other group has nothing outstanding (its depth cap would let one
    // through), but the reader's request waits in the policy: held at the gate.
    s->submit(make_request(13, 2, 2), now);
    CHECK_FALSE(s->dispatch(now));
    CHECK(s->inner().queued() == 1);
    CHECK(s->queued() == 2);
    // Once the reader's request is dispatched, the gate opens.
    s->complete(10, Time{120ms});
    CHECK(s->dispatch(Time{120ms})->id == 12);
    CHECK_FALSE(s->dispatch(Time{120ms}));
    CHECK(s->inner().queued() == 1);
    s->complete(11, Time{130ms});
    CHECK(s->dispatch(Time{130ms})->id == 13);
}

TEST_CASE("qos layer: bad settings are refused, removing them releases what was held") {
    auto s = make("none", 4);
    qos::GroupQos q;
    q.reserve.iops = 50;
    q.limit.iops = 10;
    CHECK(s->set_qos(1, q, Time{}) == "limit iops 10 is below reserve iops 50");
    q.reserve.iops = 0;
    q.limit.iops = 1;
    REQUIRE(s->set_qos(1, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    for (RequestId i = 0; i < 4; ++i) s->submit(test::make_request(i, 1, 1), Time{});
    CHECK(s->dispatch(Time{}));
    CHECK_FALSE(s->dispatch(Time{}));
    CHECK(s->queued() == 3);
    REQUIRE(s->set_qos(1, qos::GroupQos{}, Time{}).empty());
    unsigned got = 0;
    while (s->dispatch(Time{})) ++got;
    CHECK(got == 3);
    CHECK(s->queued() == 0);
    CHECK(s->in_flight() == 4);
}
