// The QoS layer (sched/qos) driven by hand in virtual time: pass-through,
// the limit's exact rate and burst, the floor ahead of the policy, the
// protectors' depth cap, and request conservation.
#include <doctest/doctest.h>

#include <deque>
#include <functional>
#include <map>
#include <set>
#include <vector>

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

// none on a device of `depth`: client 1 in group 1, which has a 25 ms
// latency target (window 100 ms), client 2 in group 2 without settings.
std::unique_ptr<qos::QosScheduler> make_with_target(unsigned depth) {
    auto s = make("none", depth);
    qos::GroupQos q;
    q.latency_target = 25ms;
    REQUIRE(s->set_qos(1, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    return s;
}

// Completes `done` at `now`, then what is dispatched next.
std::optional<RequestId> complete_then_dispatch(qos::QosScheduler& s, RequestId done, Time now) {
    s.complete(done, now);
    auto r = s.dispatch(now);
    return r ? std::optional(r->id) : std::nullopt;
}

// A device serving `channels` requests at once, each for `service(request)`,
// in dispatch order, and jobs that keep `depth` requests outstanding; the
// layer is driven in virtual time as the daemon's device loop drives it.
struct Loop {
    struct Job {
        QueueId queue;
        GroupId group;
        unsigned depth;
        std::uint64_t length = 4096;
        std::uint64_t done = 0;
    };
    qos::QosScheduler& s;
    std::vector<Time> free_at;
    std::function<Nanos(const Request&)> service;
    std::vector<Job> jobs;
    Time now{};
    RequestId next_id = 1;
    std::map<RequestId, std::size_t> job_of;
    std::multimap<Time, RequestId> completions;
    std::uint64_t spins = 0;   // wake-ups asked for at or before the time they were asked

    Loop(qos::QosScheduler& scheduler, unsigned channels, std::function<Nanos(const Request&)> service_of)
        : s(scheduler), free_at(channels, Time{}), service(std::move(service_of)) {}

    void issue(std::size_t j) {
        Request r;
        r.id = next_id++;
        r.queue = jobs[j].queue;
        r.group = jobs[j].group;
        r.offset = (r.id * 7919 % (1u << 20)) * jobs[j].length;
        r.length = jobs[j].length;
        r.arrival = now;
        job_of[r.id] = j;
        s.submit(r, now);
    }
    void run(Time until) {
        for (std::size_t j = 0; j < jobs.size(); ++j) {
            s.open_queue(jobs[j].queue, jobs[j].group, now);
            for (unsigned k = 0; k < jobs[j].depth; ++k) issue(j);
        }
        while (true) {
            while (auto r = s.dispatch(now)) {
                auto c = std::min_element(free_at.begin(), free_at.end());
                *c = std::max(*c, now) + service(*r);
                completions.emplace(*c, r->id);
            }
            Time next = until;
            if (!completions.empty()) next = std::min(next, completions.begin()->first);
            if (auto w = s.next_wakeup()) {
                // Due already, yet dispatch() just sent nothing: a driver
                // would spin. Counted, and the loop goes on to the next event.
                if (*w > now) next = std::min(next, *w);
                else ++spins;
            }
            if (next >= until) break;
            now = next;
            if (completions.empty() || completions.begin()->first != now) continue;
            const RequestId id = completions.begin()->second;
            completions.erase(completions.begin());
            const std::size_t j = job_of.at(id);
            job_of.erase(id);
            ++jobs[j].done;
            s.complete(id, now);
            issue(j);
        }
    }
};

// A request of `op` over `length` bytes in `group` (its own queue).
Request ranged(RequestId id, GroupId group, Op op, std::uint64_t length) {
    Request r = test::make_request(id, group, group);
    r.op = op;
    r.length = length;
    return r;
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
    auto s = make_with_target(2);
    qos::GroupQos floor;
    floor.reserve.iops = 10;
    REQUIRE(s->set_qos(3, floor, Time{}).empty());
    s->open_queue(3, 3, Time{});
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
    // After the window: a floor request and one of the reader's fill the
    // device, and the reader has one more waiting in the policy.
    Time now{110ms};
    s->submit(make_request(20, 3, 3), now);
    for (RequestId id : {10, 11}) s->submit(make_request(id, 1, 1), now);
    REQUIRE(s->stats(now).qos.at(1).latency_misses == 1);
    CHECK(s->dispatch(now)->id == 20);
    CHECK(s->dispatch(now)->id == 10);
    // The other group has nothing outstanding (its depth cap would let one
    // through), but the reader's request waits in the policy: held at the gate.
    s->submit(make_request(13, 2, 2), now);
    CHECK_FALSE(s->dispatch(now));
    CHECK(s->inner().queued() == 1);
    CHECK(s->queued() == 2);
    // No longer than the reader's window, though: then it keeps its depth cap.
    auto w = s->next_wakeup();
    REQUIRE(w);
    CHECK(*w <= Time{210ms});
    CHECK_FALSE(s->dispatch(Time{209ms}));
    CHECK(s->inner().queued() == 1);
    CHECK_FALSE(s->dispatch(Time{210ms}));   // the device is still full
    CHECK(s->inner().queued() == 2);
    // Once the reader's request is dispatched, the other one follows.
    CHECK(complete_then_dispatch(*s, 10, Time{220ms}) == 11u);
    CHECK(complete_then_dispatch(*s, 20, Time{230ms}) == 13u);
}

TEST_CASE("qos layer: a latency target that fills the device itself holds nobody back") {
    auto s = make_with_target(2);
    using test::make_request;
    s->submit(make_request(0, 1, 1), Time{});
    CHECK(s->dispatch(Time{})->id == 0);
    s->complete(0, Time{50ms});   // a miss
    // The reader queues three on a device that takes two: its third waits
    // for its own two, and the other group passes the gate with its depth
    // cap (one), behind it in the policy.
    const Time now{110ms};
    for (RequestId id : {10, 11, 12}) s->submit(make_request(id, 1, 1), now);
    s->submit(make_request(13, 2, 2), now);
    REQUIRE(s->stats(now).qos.at(1).latency_misses == 1);
    for (RequestId id : {10, 11}) CHECK(s->dispatch(now)->id == id);
    CHECK(s->inner().queued() == 2);
    CHECK_FALSE(s->dispatch(now));
    CHECK(complete_then_dispatch(*s, 10, Time{120ms}) == 12u);
    CHECK(complete_then_dispatch(*s, 11, Time{130ms}) == 13u);
}

TEST_CASE("qos layer: a latency target missed for good still lets unprotected groups through") {
    for (const std::string policy : {"none", "cfq", "bfq"}) {
        CAPTURE(policy);
        auto s = make(policy, 32);
        qos::GroupQos q;
        q.latency_target = 10ms;   // a qd64 reader's own queueing misses it in every window
        REQUIRE(s->set_qos(1, q, Time{}).empty());
        // 8 channels, 5 ms a request: 1600 IOPS.
        Loop loop(*s, 8, [](const Request&) { return Nanos(5ms); });
        loop.jobs = {{1, 1, 64}, {2, 2, 1}};
        loop.run(Time{10s});
        CAPTURE(loop.jobs[0].done);
        const auto st = s->stats(loop.now).qos.at(1);
        CHECK(st.latency_misses * 10 >= st.latency_windows * 9);
        // Before, the other group sent 1-3 requests in 30 s, its next one held for good.
        CHECK(loop.jobs[1].done >= 100);
    }
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

TEST_CASE("qos layer: a byte reservation's floor dispatches its rate in bytes, whatever the request size") {
    for (const std::string policy : {"none", "cfq", "bfq"}) {
        CAPTURE(policy);
        auto s = make(policy, 8);
        qos::GroupQos q;
        q.reserve.bps = 1 << 20;   // 1 MiB/s: one 1 MiB request a second
        REQUIRE(s->set_qos(1, q, Time{}).empty());
        // One request at a time, 25 ms per MiB (40 MiB/s); both groups send 1 MiB reads at qd8.
        Loop loop(*s, 1, [](const Request& r) { return Nanos(std::int64_t(r.length) * 25'000'000 / (1 << 20)); });
        loop.jobs = {{1, 1, 8, 1 << 20}, {2, 2, 8, 1 << 20}};
        loop.run(Time{10s});
        const auto reserved = loop.jobs[0].done, other = loop.jobs[1].done;
        CAPTURE(reserved);
        CAPTURE(other);
        // 10 s at 1 MiB/s, plus the full bucket it starts with.
        CHECK(s->stats(loop.now).qos.at(1).reserved_dispatches <= 12);
        // The reservation is far below a weight share: the other group keeps
        // most of its half (before, the floor sent 50 requests a second and
        // left it 3 of 400).
        CHECK(other >= 120);
    }
}

TEST_CASE("qos layer: a trim or write-zeroes costs a byte limit one sector, an iops limit one request") {
    for (Op op : {Op::trim, Op::write_zeroes}) {
        CAPTURE(to_string(op));
        auto s = make("none", 4);
        qos::GroupQos q;
        q.limit.bps = 1 << 20;   // 1 MiB/s, burst 100 ms
        REQUIRE(s->set_qos(1, q, Time{}).empty());
        s->open_queue(1, 1, Time{});
        s->submit(ranged(1, 1, op, 32 << 20), Time{});
        auto r = s->dispatch(Time{});
        REQUIRE(r);
        s->complete(r->id, Time{1ms});
        // Charged its 32 MiB, the read waited for 32 s of debt.
        s->submit(ranged(2, 1, Op::read, 4096), Time{1ms});
        r = s->dispatch(Time{1ms});
        CHECK((r && r->id == 2));
        CHECK(s->stats(Time{1ms}).qos.at(1).limit_delayed == 0);
    }
    auto s = make("none", 4);
    qos::GroupQos q;
    q.limit.iops = 10;   // burst 100 ms: one request
    REQUIRE(s->set_qos(1, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->submit(ranged(1, 1, Op::trim, 32 << 20), Time{});
    REQUIRE(s->dispatch(Time{}));
    s->submit(ranged(2, 1, Op::read, 4096), Time{1ms});
    CHECK_FALSE(s->dispatch(Time{1ms}));
    REQUIRE(s->next_wakeup());
    CHECK(*s->next_wakeup() == Time{100ms});
}

TEST_CASE("qos layer: a trim held by a byte limit is woken when one sector of tokens is in, not a full bucket") {
    for (Op op : {Op::trim, Op::write_zeroes}) {
        CAPTURE(to_string(op));
        auto s = make("none", 4);
        qos::GroupQos q;
        q.limit.bps = 1 << 20;   // 1 MiB/s, burst 1 s: a bucket of 1 MiB
        q.burst = 1s;
        REQUIRE(s->set_qos(1, q, Time{}).empty());
        s->open_queue(1, 1, Time{});
        s->submit(ranged(1, 1, Op::read, 1 << 20), Time{});   // empties the bucket
        REQUIRE(s->dispatch(Time{}));
        s->submit(ranged(2, 1, op, 32 << 20), Time{});
        CHECK_FALSE(s->dispatch(Time{}));
        // It costs 512 bytes: due after 512 / 1 MiB/s = 489 us (it waited
        // for the whole bucket, 1 s, when the wakeup charged its range).
        REQUIRE(s->next_wakeup());
        CHECK(*s->next_wakeup() <= Time{489us});
        auto r = s->dispatch(*s->next_wakeup());
        CHECK((r && r->id == 2));
    }
}

TEST_CASE("qos layer: a trim costs a byte reservation one sector: the floor is still due after it") {
    auto s = make("none", 1);
    qos::GroupQos q;
    q.reserve.bps = 1 << 20;
    REQUIRE(s->set_qos(2, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    for (RequestId i = 0; i < 8; ++i) s->submit(test::make_request(i, 1, 1), Time{});   // greedy, first in line
    s->submit(ranged(100, 2, Op::trim, 32 << 20), Time{});
    auto r = s->dispatch(Time{});
    REQUIRE(r);
    CHECK(r->id == 100);   // the floor, ahead of the greedy ones
    s->complete(r->id, Time{1ms});
    // Charged its 32 MiB, the floor was next due 32 s later.
    s->submit(ranged(101, 2, Op::read, 4096), Time{1ms});
    r = s->dispatch(Time{1ms});
    REQUIRE(r);
    CHECK(r->id == 101);
    CHECK(s->stats(Time{1ms}).qos.at(2).reserved_dispatches == 2);
}

TEST_CASE("qos layer: with the device full, no wake-up is asked for that dispatch() cannot act on") {
    auto s = make("cfq", 1);   // a device that takes one request at a time
    qos::GroupQos q;
    q.reserve.iops = 100;
    REQUIRE(s->set_qos(2, q, Time{}).empty());
    s->open_queue(1, 1, Time{});
    s->open_queue(2, 2, Time{});
    using test::make_request;
    // A sync reader's request completes: cfq idles for its next one (a timer).
    s->submit(make_request(1, 1, 1), Time{});
    REQUIRE(s->dispatch(Time{})->id == 1);
    s->complete(1, Time{1ms});
    const auto idle_until = s->inner().next_wakeup();
    REQUIRE(idle_until);
    // The reserved group's request goes to the device by the floor and holds it for 50 ms.
    s->submit(make_request(1000, 2, 2), Time{1ms});
    REQUIRE(s->dispatch(Time{1ms})->id == 1000);
    Time now = *idle_until + 1us;
    CHECK_FALSE(s->dispatch(now));
    auto w = s->next_wakeup();
    CHECK((!w || *w > now));   // before: the idle timer's time, in the past
    // The completion makes room; cfq's timer fires at the next dispatch.
    s->complete(1000, Time{51ms});
    CHECK_FALSE(s->dispatch(Time{51ms}));
    w = s->next_wakeup();
    CHECK((!w || *w > Time{51ms}));
}

TEST_CASE("qos layer: a client's requests released after it closed do not bring its queue back") {
    // cfq idles after a live client's sequential read and never for a closed
    // client: idle time tells whether cfq took the dead client for alive.
    for (bool served_before_close : {false, true}) {
        CAPTURE(served_before_close);
        std::string error;
        DeviceTraits traits{true, 1};
        auto inner = make_scheduler("cfq", traits, {}, error);
        REQUIRE_MESSAGE(inner, error);
        auto s = qos::with_qos(std::move(inner), traits);
        qos::GroupQos q;
        q.limit.iops = 10;   // burst 100 ms: one request
        REQUIRE(s->set_qos(1, q, Time{}).empty());
        Time now{};
        RequestId next = 0;
        auto run = [&] {
            while (auto r = s->dispatch(now)) {
                now += 1ms;
                s->complete(r->id, now);
            }
        };
        for (QueueId client = 1; client <= 5; ++client) {
            s->open_queue(client, 1, now);
            for (std::uint64_t i = 0; i < 3; ++i) {
                Request r = test::make_request(next++, client, 1);
                r.offset = (client * 1000 + i) * 4096;
                s->submit(r, now);
            }
            // Its queue in cfq is then empty (freed at close) or still has the request.
            if (served_before_close) run();
            s->close_queue(client, now);   // two of its three still wait for the limit
            for (run(); s->queued() || s->in_flight(); run()) {
                auto w = s->next_wakeup();
                REQUIRE(w);
                now = std::max(now, *w);
            }
        }
        CHECK(s->stats(now).device.idle_time == Nanos(0));
    }
}
