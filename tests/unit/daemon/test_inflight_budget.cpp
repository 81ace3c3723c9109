// daemon/inflight_budget: the per-device in-flight limits connections share,
// with first-come-first-served admission (tickets) like the kernel's
// request pool.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "daemon/device/inflight_budget.hpp"
#include "recording_waiter.hpp"

using nbdsched::daemon::InflightBudget;

using Waiter = nbdsched::testlib::RecordingWaiter;

TEST_CASE("inflight budget: room goes to the line in order, one ticket per freed request") {
    std::vector<int> log;
    InflightBudget b(2, 1u << 20);
    auto a = std::make_shared<Waiter>(log, 1);
    auto c = std::make_shared<Waiter>(log, 2);
    CHECK(b.admits(0, false));
    b.take_request(0, false);
    b.take_request(0, false);
    CHECK_FALSE(b.admits(0, false));
    b.wait(0, a);
    {
        auto gone = std::make_shared<Waiter>(log, 9);
        b.wait(0, gone);   // a connection that finished while waiting is skipped
    }
    b.wait(0, c);
    b.give(0, 0);   // one request's room: the head of the line only
    CHECK(log == std::vector<int>{1});
    CHECK(b.stats().tickets == 1);
    // The room is promised: a newcomer without a ticket may not take it,
    // even though fewer than two requests are in flight.
    CHECK_FALSE(b.admits(0, false));
    CHECK(b.admits(0, true));
    b.take_request(0, true);
    CHECK(b.stats().tickets == 0);
    CHECK(c->woken == 0);
    b.give(0, 0);
    CHECK(log == std::vector<int>{1, 2});   // the dead waiter was skipped
    b.take_request(0, true);
    b.give(0, 0);
    b.give(0, 0);
    CHECK(b.admits(0, false));   // line empty, room: anyone
    const auto s = b.stats();
    CHECK(s.requests == 0);
    CHECK(s.peak_requests == 2);
    CHECK(s.waits == 3);
}

TEST_CASE("inflight budget: a returned ticket passes down the line; joining with room serves at once") {
    std::vector<int> log;
    InflightBudget b(1, 1u << 20);
    auto a = std::make_shared<Waiter>(log, 1);
    auto c = std::make_shared<Waiter>(log, 2);
    b.take_request(0, false);
    b.wait(0, a);
    b.wait(0, c);
    b.give(0, 0);
    CHECK(log == std::vector<int>{1});
    b.return_ticket(0);   // 1 closed before using its turn
    CHECK(log == std::vector<int>{1, 2});
    b.return_ticket(0);   // and 2 too: nobody left in line, room for anyone
    CHECK(b.admits(0, false));
    // A line that formed behind a ticket is served by wait() itself once
    // there is room, so it cannot be stranded with nothing in flight.
    b.take_request(0, false);
    auto d = std::make_shared<Waiter>(log, 3);
    b.give(0, 0);
    b.wait(0, d);
    CHECK(log == std::vector<int>{1, 2, 3});
}

TEST_CASE("inflight budget: one ticket at a time, the next once the last request's bytes are counted") {
    std::vector<int> log;
    InflightBudget b(100, 1000);
    auto a = std::make_shared<Waiter>(log, 1);
    auto c = std::make_shared<Waiter>(log, 2);
    auto d = std::make_shared<Waiter>(log, 3);
    b.take_request(0, false);
    b.take_bytes(0, 1000);   // the byte budget is full
    b.wait(0, a);
    b.wait(0, c);
    b.wait(0, d);
    b.give(0, 1000);   // room for many requests by count, but their sizes are unknown
    CHECK(log == std::vector<int>{1});
    CHECK_FALSE(b.admits(0, false));   // the line is empty, but 1's request is still to come
    b.take_request(0, true);
    CHECK(log == std::vector<int>{1});   // not before 1's bytes are in
    b.take_bytes(0, 400);
    CHECK(log == std::vector<int>{1, 2});
    b.take_request(0, true);
    b.take_bytes(0, 600);   // full again: 3 waits for a reply
    CHECK(log == std::vector<int>{1, 2});
    b.give(0, 400);
    CHECK(log == std::vector<int>{1, 2, 3});
}

TEST_CASE("inflight budget: bytes fill it; a request larger than the budget passes alone") {
    std::vector<int> log;
    InflightBudget b(100, 4096);
    CHECK(b.admits(0, false));   // idle: whatever size comes next is admitted
    b.take_request(0, false);
    b.take_bytes(0, 65536);
    CHECK_FALSE(b.admits(0, false));
    auto w = std::make_shared<Waiter>(log, 1);
    b.wait(0, w);
    b.give(0, 65536);
    CHECK(w->woken == 1);
    CHECK(b.stats().peak_bytes == 65536);
    CHECK(b.stats().bytes == 0);
}

TEST_CASE("inflight budget: no ticket while still full") {
    std::vector<int> log;
    InflightBudget b(1, 1u << 20);
    b.take_request(0, false);
    b.take_request(0, false);   // over by one: give() must wait for real room
    auto w = std::make_shared<Waiter>(log, 1);
    b.wait(0, w);
    b.give(0, 0);
    CHECK(w->woken == 0);
    b.give(0, 0);
    CHECK(w->woken == 1);
}

// The budget is asked before every request and told of its bytes and its
// reply: with one group and nobody waiting, none of that needs the time
// (it only tells which other groups use the device), so no clock is read
// per request; only a group going idle notes when.
TEST_CASE("inflight budget: a group alone reads no clock per request") {
    std::uint64_t reads = 0;
    InflightBudget::Options o;
    o.max_requests = 64;
    o.max_bytes = 64u << 20;
    o.clock = [&reads] {
        ++reads;
        return nbdsched::Nanos{0};
    };
    InflightBudget b(o);
    b.take_request(0, false);   // one request stays in flight: the group never goes idle
    for (int i = 0; i < 1000; ++i) {
        REQUIRE(b.admits(0, false));
        b.take_request(0, false);
        b.take_bytes(0, 4096);
        b.give(0, 4096);
    }
    CHECK(reads == 0);
    b.give(0, 0);
    CHECK(reads == 1);   // idle since now
    // A second group makes the time count: admits() asks it again.
    b.take_request(7, false);
    CHECK(b.admits(0, false));
    CHECK(reads > 1);
}
