// daemon/inflight_budget: the per-device in-flight limits connections share,
// with first-come-first-served admission (tickets) like the kernel's
// request pool.
#include <doctest/doctest.h>

#include <memory>
#include <vector>

#include "daemon/device/inflight_budget.hpp"

using nbdsched::daemon::InflightBudget;

namespace {

// A connection in line: records the order in which tickets arrive.
struct Waiter final : InflightBudget::Waiter {
    Waiter(std::vector<int>& log, int id) : log(log), id(id) {}
    std::vector<int>& log;
    int id;
    int woken = 0;
    void budget_available() override {
        ++woken;
        log.push_back(id);
    }
};

}   // namespace

TEST_CASE("inflight budget: room goes to the line in order, one ticket per freed request") {
    std::vector<int> log;
    InflightBudget b(2, 1u << 20);
    auto a = std::make_shared<Waiter>(log, 1);
    auto c = std::make_shared<Waiter>(log, 2);
    CHECK(b.admits(false));
    b.take_request(false);
    b.take_request(false);
    CHECK_FALSE(b.admits(false));
    b.wait(a);
    {
        auto gone = std::make_shared<Waiter>(log, 9);
        b.wait(gone);   // a connection that finished while waiting is skipped
    }
    b.wait(c);
    b.give(0);   // one request's room: the head of the line only
    CHECK(log == std::vector<int>{1});
    CHECK(b.stats().tickets == 1);
    // The room is promised: a newcomer without a ticket may not take it,
    // even though fewer than two requests are in flight.
    CHECK_FALSE(b.admits(false));
    CHECK(b.admits(true));
    b.take_request(true);
    CHECK(b.stats().tickets == 0);
    CHECK(c->woken == 0);
    b.give(0);
    CHECK(log == std::vector<int>{1, 2});   // the dead waiter was skipped
    b.take_request(true);
    b.give(0);
    b.give(0);
    CHECK(b.admits(false));   // line empty, room: anyone
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
    b.take_request(false);
    b.wait(a);
    b.wait(c);
    b.give(0);
    CHECK(log == std::vector<int>{1});
    b.return_ticket();   // 1 closed before using its turn
    CHECK(log == std::vector<int>{1, 2});
    b.return_ticket();   // and 2 too: nobody left in line, room for anyone
    CHECK(b.admits(false));
    // A line that formed behind a ticket is served by wait() itself once
    // there is room, so it cannot be stranded with nothing in flight.
    b.take_request(false);
    auto d = std::make_shared<Waiter>(log, 3);
    b.give(0);
    b.wait(d);
    CHECK(log == std::vector<int>{1, 2, 3});
}

TEST_CASE("inflight budget: one ticket at a time, the next once the last request's bytes are counted") {
    std::vector<int> log;
    InflightBudget b(100, 1000);
    auto a = std::make_shared<Waiter>(log, 1);
    auto c = std::make_shared<Waiter>(log, 2);
    auto d = std::make_shared<Waiter>(log, 3);
    b.take_request(false);
    b.take_bytes(1000);   // the byte budget is full
    b.wait(a);
    b.wait(c);
    b.wait(d);
    b.give(1000);   // room for many requests by count, but their sizes are unknown
    CHECK(log == std::vector<int>{1});
    CHECK_FALSE(b.admits(false));   // the line is empty, but 1's request is still to come
    b.take_request(true);
    CHECK(log == std::vector<int>{1});   // not before 1's bytes are in
    b.take_bytes(400);
    CHECK(log == std::vector<int>{1, 2});
    b.take_request(true);
    b.take_bytes(600);   // full again: 3 waits for a reply
    CHECK(log == std::vector<int>{1, 2});
    b.give(400);
    CHECK(log == std::vector<int>{1, 2, 3});
}

TEST_CASE("inflight budget: bytes fill it; a request larger than the budget passes alone") {
    std::vector<int> log;
    InflightBudget b(100, 4096);
    CHECK(b.admits(false));   // idle: whatever size comes next is admitted
    b.take_request(false);
    b.take_bytes(65536);
    CHECK_FALSE(b.admits(false));
    auto w = std::make_shared<Waiter>(log, 1);
    b.wait(w);
    b.give(65536);
    CHECK(w->woken == 1);
    CHECK(b.stats().peak_bytes == 65536);
    CHECK(b.stats().bytes == 0);
}

TEST_CASE("inflight budget: no ticket while still full") {
    std::vector<int> log;
    InflightBudget b(1, 1u << 20);
    b.take_request(false);
    b.take_request(false);   // over by one: give() must wait for real room
    auto w = std::make_shared<Waiter>(log, 1);
    b.wait(w);
    b.give(0);
    CHECK(w->woken == 0);
    b.give(0);
    CHECK(w->woken == 1);
}
