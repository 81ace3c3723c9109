// The simulator's timer slack is the same sequence for a seed on any
// standard library: the engine's output is fixed by the C++ standard and the
// mapping onto [0, max] is ours. The golden values are the property itself.
#include <doctest/doctest.h>

#include <random>
#include <vector>

#include "tools/sim/timer_slack.hpp"

using namespace nbdsched;
using namespace nbdsched::sim;
using namespace std::chrono_literals;

TEST_CASE("timer slack: seed 1, up to 1 ms late, gives these delays with any standard library") {
    TimerSlack slack(1, 1ms);
    std::vector<std::int64_t> got;
    for (int i = 0; i < 6; ++i) got.push_back(slack.next().count());
    CHECK(got == std::vector<std::int64_t>{133876, 136407, 451215, 21024, 350898, 911358});
}

TEST_CASE("timer slack: each delay is the engine's output scaled by multiply-shift onto [0, max]") {
    std::mt19937_64 engine(7);
    TimerSlack slack(7, 10ms);
    for (int i = 0; i < 1000; ++i) {
        std::uint64_t raw = engine();
        std::int64_t d = slack.next().count();
        CHECK(d == std::int64_t((unsigned __int128)raw * 10000001 >> 64));
        CHECK(d >= 0);
        CHECK(d <= 10000000);
    }
    CHECK(TimerSlack::scale(0, 999) == 0);
    CHECK(TimerSlack::scale(UINT64_MAX, 999) == 999);
    CHECK(TimerSlack::scale(1ull << 63, 999) == 500);
    CHECK(TimerSlack::scale(12345, UINT64_MAX) == 12345);
}

TEST_CASE("timer slack: none is always on time") {
    TimerSlack slack(1, Nanos(0));
    for (int i = 0; i < 10; ++i) CHECK(slack.next() == Nanos(0));
}
