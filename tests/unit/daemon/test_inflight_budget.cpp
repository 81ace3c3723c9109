// daemon/inflight_budget: the per-device in-flight limits connections share.
#include <doctest/doctest.h>

#include <memory>

#include "daemon/inflight_budget.hpp"

using nbdsched::daemon::InflightBudget;

namespace {

struct Counter final : InflightBudget::Waiter {
    int woken = 0;
    void budget_available() override { ++woken; }
};

} // namespace

TEST_CASE("inflight budget: full at the request limit; every waiter woken once there is room") {
    InflightBudget b(2, 1u << 20);
    auto a = std::make_shared<Counter>();
    auto c = std::make_shared<Counter>();
    b.take_request();
    CHECK_FALSE(b.full());
    b.take_request();
    CHECK(b.full());
    b.wait(a);
    b.wait(c);
    {
        auto gone = std::make_shared<Counter>();
        b.wait(gone);   // a connection that finished while waiting is skipped
    }
    b.give(0);
    CHECK(a->woken == 1);
    CHECK(c->woken == 1);
    b.give(0);   // no longer registered: not woken again
    CHECK(a->woken == 1);
    const auto s = b.stats();
    CHECK(s.requests == 0);
    CHECK(s.peak_requests == 2);
    CHECK(s.waits == 3);
}

TEST_CASE("inflight budget: bytes fill it; a request larger than the budget passes alone") {
    InflightBudget b(100, 4096);
    CHECK_FALSE(b.full());   // idle: whatever size comes next is admitted
    b.take_request();
    b.take_bytes(65536);
    CHECK(b.full());
    auto w = std::make_shared<Counter>();
    b.wait(w);
    b.give(65536);
    CHECK_FALSE(b.full());
    CHECK(w->woken == 1);
    CHECK(b.stats().peak_bytes == 65536);
    CHECK(b.stats().bytes == 0);
}

TEST_CASE("inflight budget: no wake while still full") {
    InflightBudget b(1, 1u << 20);
    b.take_request();
    b.take_request();   // over by one: give() must wait for real room
    auto w = std::make_shared<Counter>();
    b.wait(w);
    b.give(0);
    CHECK(w->woken == 0);
    b.give(0);
    CHECK(w->woken == 1);
}
