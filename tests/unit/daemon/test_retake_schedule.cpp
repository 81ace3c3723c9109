// RetakeSchedule (daemon/process/retake_schedule.hpp): each device whose
// lock is lost has its own backoff. A device newly lost is due after the
// first delay even while another waits the longest; a device's delay
// doubles with its own failures only; a running try is never due; a lock
// back starts the device over.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "daemon/process/retake_schedule.hpp"

using nbdsched::daemon::RetakeSchedule;
using namespace std::chrono_literals;
using Names = std::vector<std::string>;

namespace {

const RetakeSchedule::Time t0{1000s};   // a steady clock's epoch is anywhere

// `device` fails each time it is due until its delay is `longest`; the time then.
RetakeSchedule::Time fail_until_longest(RetakeSchedule& s, const std::string& device, RetakeSchedule::Time now) {
    s.failed(device, now);
    while (s.delay(device) < 30s) {
        now = *s.next();
        s.started(device);
        s.failed(device, now);
    }
    return now;
}

}   // namespace

TEST_CASE("retake schedule: a device's delay doubles from the first to the longest with its own failures") {
    RetakeSchedule s(1s, 30s);
    CHECK(s.empty());
    CHECK_FALSE(s.next());
    std::vector<std::chrono::milliseconds> delays;
    auto now = t0;
    for (int i = 0; i < 8; ++i) {
        delays.push_back(s.failed("a", now));
        CHECK(s.next() == now + delays.back());
        CHECK(s.due(now + delays.back() - 1ms).empty());
        now += delays.back();
        CHECK(s.due(now) == Names{"a"});
        s.started("a");
        CHECK(s.due(now + 1h).empty());   // its try runs: its answer sets the next
        CHECK_FALSE(s.next());
    }
    CHECK(delays == std::vector<std::chrono::milliseconds>{1s, 2s, 4s, 8s, 16s, 30s, 30s, 30s});
    s.back("a");
    CHECK(s.empty());
    CHECK(s.delay("a") == 0ms);
    CHECK(s.failed("a", now) == 1s);   // lost again: starts over
}

TEST_CASE("retake schedule: a device newly lost is due after the first delay while another waits the longest") {
    RetakeSchedule s(1s, 30s);
    const auto now = fail_until_longest(s, "old", t0);
    REQUIRE(s.delay("old") == 30s);
    CHECK(s.failed("new", now + 5s) == 1s);
    CHECK(s.next() == now + 6s);
    CHECK(s.due(now + 6s) == Names{"new"});
    CHECK(s.delay("old") == 30s);   // untouched by the other's loss
    s.started("new");
    CHECK(s.failed("new", now + 7s) == 2s);   // its own doubling, not the other's
    CHECK(s.next() == now + 9s);
    CHECK(s.due(now + 30s) == Names{"new", "old"});
    s.back("new");
    CHECK(s.due(now + 30s) == Names{"old"});
}

TEST_CASE("retake schedule: a try begun elsewhere (a failed hand-over's take-back) holds a device's time") {
    RetakeSchedule s(1s, 30s);
    s.failed("a", t0);
    s.failed("b", t0);
    s.started("a");
    s.started("unknown");   // a device whose lock is not lost: nothing to hold
    CHECK(s.due(t0 + 1h) == Names{"b"});
    CHECK(s.next() == t0 + 1s);
    s.failed("a", t0 + 3s);   // the take-back's answer: its second failure
    CHECK(s.delay("a") == 2s);
    CHECK(s.next() == t0 + 1s);
}
