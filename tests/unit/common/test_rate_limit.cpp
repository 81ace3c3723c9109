// The log's rate limit: a burst per interval passes, the rest is counted and
// reported once, by the first event of the next interval.
#include <doctest/doctest.h>

#include "common/rate_limit.hpp"

using namespace nbdsched;
using namespace std::chrono_literals;

TEST_CASE("rate limit: a burst per interval, the rest counted and reported once") {
    RateLimit limit(5s, 3);
    std::uint64_t held = 99;
    const auto t0 = 1000s;   // a monotonic clock's epoch is anywhere
    for (int i = 0; i < 3; ++i) {
        CHECK(limit.allow(t0 + std::chrono::milliseconds(i), held));
        CHECK(held == 0);
    }
    for (int i = 0; i < 7; ++i) CHECK_FALSE(limit.allow(t0 + 1s, held));
    CHECK(held == 0);
    CHECK_FALSE(limit.allow(t0 + 4999ms, held));   // still the first interval: 8 held back

    CHECK(limit.allow(t0 + 5s, held));
    CHECK(held == 8);
    CHECK(limit.allow(t0 + 6s, held));
    CHECK(held == 0);   // reported once
}

TEST_CASE("rate limit: a quiet interval reports nothing and starts a new burst") {
    RateLimit limit(1s, 1);
    std::uint64_t held = 0;
    CHECK(limit.allow(0s, held));
    CHECK(limit.allow(10s, held));
    CHECK(held == 0);
    CHECK_FALSE(limit.allow(10s, held));
    CHECK(limit.allow(11s, held));
    CHECK(held == 1);
}
