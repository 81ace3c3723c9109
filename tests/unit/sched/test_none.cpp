#include <doctest/doctest.h>

#include <set>

#include "test_request.hpp"
#include "sched/none.hpp"
#include "sched/scheduler.hpp"

using namespace nbdsched;
using namespace nbdsched::sched;

namespace {

using test::make_request;

std::unique_ptr<Scheduler> make(unsigned depth, const Tunables& tunables = {}) {
    std::string error;
    auto s = make_scheduler("none", DeviceTraits{false, depth}, tunables, error);
    REQUIRE_MESSAGE(s, error);
    return s;
}

}   // namespace

TEST_CASE("none: every request is dispatched once and completed (conservation)") {
    auto s = make(4);
    s->set_group(1, 100);
    s->set_group(2, 500);
    for (QueueId q = 0; q < 5; ++q) s->open_queue(q, GroupId(q % 2 + 1), Time{});
    std::set<RequestId> dispatched;
    std::vector<RequestId> in_flight;
    RequestId next = 0;
    Time now{};
    for (int round = 0; round < 200; ++round) {
        for (int k = 0; k < 3 && next < 400; ++k, ++next)
            s->submit(make_request(next, next % 5, GroupId(next % 5 % 2 + 1)), now);
        while (auto r = s->dispatch(now)) {
            CHECK(dispatched.insert(r->id).second);
            in_flight.push_back(r->id);
        }
        CHECK(s->in_flight() == in_flight.size());
        if (!in_flight.empty()) {
            s->complete(in_flight.front(), now);
            in_flight.erase(in_flight.begin());
        }
        now += Nanos(1000);
    }
    while (!in_flight.empty() || s->queued() > 0) {
        while (auto r = s->dispatch(now)) {
            CHECK(dispatched.insert(r->id).second);
            in_flight.push_back(r->id);
        }
        REQUIRE(!in_flight.empty());
        s->complete(in_flight.back(), now);
        in_flight.pop_back();
    }
    CHECK(dispatched.size() == 400);
    auto st = s->stats(now);
    CHECK(st.device.dispatched == 400);
    CHECK(st.device.completed == 400);
    CHECK(st.device.queued == 0);
    CHECK(st.device.in_flight == 0);
    CHECK(st.groups.at(1).completed + st.groups.at(2).completed == 400);
    CHECK(st.groups.at(2).weight == 500);
    CHECK(s->next_wakeup() == std::nullopt);
}

TEST_CASE("none: never more than max_depth in flight") {
    auto s = make(3);
    s->open_queue(1, 0, Time{});
    for (RequestId i = 0; i < 10; ++i) s->submit(make_request(i, 1), Time{});
    int n = 0;
    while (s->dispatch(Time{})) ++n;
    CHECK(n == 3);
    CHECK(s->in_flight() == 3);
    CHECK(s->queued() == 7);
    s->complete(1, Time{});
    CHECK(s->dispatch(Time{}));
    CHECK_FALSE(s->dispatch(Time{}));
}

TEST_CASE("none: max_depth tunable lowers the depth and is clamped to the device") {
    auto s = make(8, {{"max_depth", "2"}});
    CHECK(s->get_tunable("max_depth") == "2");
    s->open_queue(1, 0, Time{});
    for (RequestId i = 0; i < 10; ++i) s->submit(make_request(i, 1), Time{});
    int n = 0;
    while (s->dispatch(Time{})) ++n;
    CHECK(n == 2);
    // A run-time raise takes effect at the next dispatch, no request lost.
    CHECK(s->set_tunable("max_depth", "64", Time{}).empty());
    CHECK(s->get_tunable("max_depth") == "8");
    while (s->dispatch(Time{})) ++n;
    CHECK(n == 8);
    CHECK(s->queued() == 2);
    CHECK_FALSE(s->set_tunable("max_depth", "0", Time{}).empty());
    CHECK_FALSE(s->set_tunable("max_depth", "x", Time{}).empty());
    CHECK_FALSE(s->set_tunable("slice_idle", "8ms", Time{}).empty());
}

TEST_CASE("none: FIFO order across queues") {
    auto s = make(1);
    for (QueueId q = 0; q < 3; ++q) s->open_queue(q, 0, Time{});
    const std::vector<QueueId> queues{2, 0, 1, 1, 0, 2, 2};
    for (RequestId i = 0; i < queues.size(); ++i) s->submit(make_request(i, queues[i]), Time{});
    for (RequestId i = 0; i < queues.size(); ++i) {
        auto r = s->dispatch(Time{});
        REQUIRE(r);
        CHECK(r->id == i);
        CHECK(r->queue == queues[i]);
        CHECK_FALSE(s->dispatch(Time{}));
        s->complete(r->id, Time{});
    }
}

TEST_CASE("factory: unknown policy and bad tunables are errors") {
    std::string error;
    CHECK(make_scheduler("deadline", DeviceTraits{}, {}, error) == nullptr);
    CHECK(error.find("deadline") != std::string::npos);
    CHECK(make_scheduler("none", DeviceTraits{}, {{"bogus", "1"}}, error) == nullptr);
    CHECK_FALSE(error.empty());
    CHECK(tunable_names("none") == std::vector<std::string>{"max_depth"});
    CHECK(tunable_names("deadline").empty());
}
