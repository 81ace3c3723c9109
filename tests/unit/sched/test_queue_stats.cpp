// Per-queue counters of none, cfq and bfq: a queue's live while it is open or
// has requests, and go once it is closed and drained (its group's stay), so
// that many short connections do not pile up in every stats() copy.
#include <doctest/doctest.h>

#include <string>

#include "sched/scheduler.hpp"
#include "test_request.hpp"

using namespace nbdsched::sched;
using nbdsched::sched::test::make_request;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<Scheduler> make(const char* policy) {
    std::string error;
    auto s = make_scheduler(policy, DeviceTraits{false, 4}, {}, error);
    REQUIRE_MESSAGE(s, error);
    return s;
}

// Dispatches and completes everything; returns how many completed.
int drain(Scheduler& s, Time& now) {
    int done = 0;
    for (int i = 0; i < 10000 && (s.queued() || s.in_flight()); ++i) {
        std::vector<RequestId> ids;
        while (auto r = s.dispatch(now)) ids.push_back(r->id);
        now += 100us;
        for (RequestId id : ids) s.complete(id, now), ++done;
        if (ids.empty()) now += 10ms;   // past any idle timer
    }
    return done;
}

}   // namespace

TEST_CASE("per-queue stats: closed and drained queues are forgotten, group totals stay") {
    for (const char* policy : {"none", "cfq", "bfq"}) {
        CAPTURE(std::string(policy));
        auto s = make(policy);
        s->set_group(1, 100);
        Time now{};
        RequestId id = 1;
        int completed = 0;
        constexpr int kClients = 1000;
        for (QueueId q = 1; q <= kClients; ++q) {
            s->open_queue(q, 1, now);
            // A sync read and an async write each (cfq's and bfq's async
            // requests sit in shared or separate queues).
            Request read = make_request(id++, q, 1);
            Request write = make_request(id++, q, 1);
            write.op = Op::write;
            write.sync = false;
            s->submit(read, now);
            s->submit(write, now);
            if (q % 3 == 0) {
                // Closed with both still waiting: counted until they complete.
                s->close_queue(q, now);
                CHECK(s->stats(now).queues.size() >= 1);
                completed += drain(*s, now);
            } else if (q % 3 == 1) {
                // Closed with them at the device.
                std::vector<RequestId> ids;
                while (auto r = s->dispatch(now)) ids.push_back(r->id);
                s->close_queue(q, now);
                now += 100us;
                for (RequestId d : ids) s->complete(d, now), ++completed;
                completed += drain(*s, now);
            } else {
                completed += drain(*s, now);
                CHECK(s->stats(now).queues.count(q) == 1);   // open: still listed
                s->close_queue(q, now);
            }
        }
        completed += drain(*s, now);
        CHECK(completed == 2 * kClients);
        const SchedulerStats st = s->stats(now);
        CHECK(st.queues.size() <= 1);
        CHECK(st.groups.at(1).completed == 2 * kClients);
        CHECK(st.device.completed == 2 * kClients);
    }
}

TEST_CASE("per-queue stats: an open queue keeps its counters, a request after close is counted and forgotten") {
    for (const char* policy : {"none", "cfq", "bfq"}) {
        CAPTURE(std::string(policy));
        auto s = make(policy);
        s->set_group(1, 100);
        Time now{};
        s->open_queue(1, 1, now);
        s->open_queue(2, 1, now);
        s->submit(make_request(1, 1, 1), now);
        s->submit(make_request(2, 2, 1), now);
        drain(*s, now);
        s->close_queue(2, now);
        // A layer above (the QoS gate) may hand over a request of a client
        // that already closed, with nobody to close its queue again.
        s->submit(make_request(3, 2, 1), now);
        CHECK(drain(*s, now) == 1);
        // A request of a client never opened is served the same way.
        s->submit(make_request(4, 3, 1), now);
        CHECK(drain(*s, now) == 1);
        const SchedulerStats st = s->stats(now);
        REQUIRE(st.queues.count(1) == 1);
        CHECK(st.queues.at(1).completed == 1);
        CHECK(st.queues.count(2) == 0);
        CHECK(st.queues.count(3) == 0);
        CHECK(st.groups.at(1).completed == 4);
    }
}
