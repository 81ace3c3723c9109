// The in-flight pool's split by weight (sched/pool_share.hpp): the shares of
// groups using the device, a lone group's whole pool, no limit, the floor of 1.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "sched/pool_share.hpp"

using nbdsched::sched::weighted_share;

TEST_CASE("a pool is split by weight, rounded down, at least one each") {
    CHECK(weighted_share(64, 1000, 1100) == 58);   // 64 * 1000 / 1100 = 58.18
    CHECK(weighted_share(64, 100, 1100) == 5);     // 5.81
    CHECK(weighted_share(64, 1, 1000) == 1);       // 0.064: the floor
    CHECK(weighted_share(3, 100, 300) == 1);
}

TEST_CASE("a lone group has the whole pool, with or without a limit") {
    constexpr auto none = std::numeric_limits<std::uint64_t>::max();
    for (std::uint64_t w : {1u, 100u, 1000u}) {
        CHECK(weighted_share(64, w, w) == 64);
        CHECK(weighted_share(none, w, w) == none);
        CHECK(weighted_share(0, w, w) == 1);   // an empty pool still admits one
    }
    // No limit split between groups does not overflow.
    CHECK(weighted_share(none, 1000, 2000) == none / 2);
}
