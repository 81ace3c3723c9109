// LostLocks (daemon/process/lost_locks.hpp): one record per device whose
// lock is lost, with its failed tries and its own backoff. A device newly
// lost is due after the first delay even while another waits the longest;
// a device's delay doubles and its count grows with its own failures only;
// a running try is never due; a lock back starts the device over.
#include <doctest/doctest.h>

#include <chrono>
#include <string>
#include <vector>

#include "daemon/process/lost_locks.hpp"

using nbdsched::daemon::LostLocks;
using namespace std::chrono_literals;
using Names = std::vector<std::string>;

namespace {

const LostLocks::Time t0{1000s};   // a steady clock's epoch is anywhere

// Its last delay; 0 when its lock is not lost.
std::chrono::milliseconds delay(const LostLocks& s, const std::string& device) {
    const auto* lost = s.find(device);
    return lost ? lost->delay : 0ms;
}

// `device` fails each time it is due until its delay is `longest`; the time then.
LostLocks::Time fail_until_longest(LostLocks& s, const std::string& device, LostLocks::Time now) {
    s.failed(device, now);
    while (delay(s, device) < 30s) {
        now = *s.next();
        s.started(device);
        s.failed(device, now);
    }
    return now;
}

}   // namespace

TEST_CASE("lost locks: a device's delay doubles from the first to the longest with its own failures") {
    LostLocks s(1s, 30s);
    CHECK(s.empty());
    CHECK_FALSE(s.next());
    std::vector<std::chrono::milliseconds> delays;
    auto now = t0;
    for (unsigned i = 1; i <= 8; ++i) {
        const auto& lost = s.failed("a", now);
        CHECK(lost.failures == i);
        delays.push_back(lost.delay);
        CHECK(s.next() == now + delays.back());
        CHECK(s.due(now + delays.back() - 1ms).empty());
        now += delays.back();
        CHECK(s.due(now) == Names{"a"});
        s.started("a");
        CHECK(s.due(now + 1h).empty());   // its try runs: its answer sets the next
        CHECK_FALSE(s.next());
        REQUIRE(s.find("a"));
        CHECK(s.find("a")->failures == i);   // a try that runs has not failed yet
    }
    CHECK(delays == std::vector<std::chrono::milliseconds>{1s, 2s, 4s, 8s, 16s, 30s, 30s, 30s});
    CHECK(s.lost("a"));
    CHECK(s.back("a") == 8);
    CHECK(s.empty());
    CHECK_FALSE(s.lost("a"));
    CHECK_FALSE(s.find("a"));
    CHECK(delay(s, "a") == 0ms);
    CHECK(s.back("a") == 0);                  // not lost: nothing to forget
    const auto& again = s.failed("a", now);   // lost again: starts over
    CHECK(again.delay == 1s);
    CHECK(again.failures == 1);
}

TEST_CASE("lost locks: a device newly lost is due after the first delay while another waits the longest") {
    LostLocks s(1s, 30s);
    const auto now = fail_until_longest(s, "old", t0);
    REQUIRE(delay(s, "old") == 30s);
    const unsigned old_failures = s.find("old")->failures;
    CHECK(old_failures == 6);   // 1, 2, 4, 8, 16, 30 s
    CHECK(s.failed("new", now + 5s).delay == 1s);
    CHECK(s.next() == now + 6s);
    CHECK(s.due(now + 6s) == Names{"new"});
    CHECK(delay(s, "old") == 30s);   // untouched by the other's loss
    CHECK(s.find("old")->failures == old_failures);
    s.started("new");
    const auto& second = s.failed("new", now + 7s);
    CHECK(second.delay == 2s);   // its own doubling, not the other's
    CHECK(second.failures == 2);
    CHECK(s.next() == now + 9s);
    CHECK(s.due(now + 30s) == Names{"new", "old"});
    CHECK(s.back("new") == 2);
    CHECK(s.due(now + 30s) == Names{"old"});
    REQUIRE(s.all().size() == 1);
    CHECK(s.all().begin()->first == "old");
    CHECK(s.all().begin()->second.failures == old_failures);
}

TEST_CASE("lost locks: a try begun elsewhere (a failed hand-over's take-back) holds a device's time") {
    LostLocks s(1s, 30s);
    s.failed("a", t0);
    s.failed("b", t0);
    s.started("a");
    s.started("unknown");   // a device whose lock is not lost: nothing to hold, nothing recorded
    CHECK_FALSE(s.lost("unknown"));
    CHECK(s.due(t0 + 1h) == Names{"b"});
    CHECK(s.next() == t0 + 1s);
    s.failed("a", t0 + 3s);   // the take-back's answer: its second failure
    CHECK(delay(s, "a") == 2s);
    CHECK(s.find("a")->failures == 2);
    CHECK(s.find("b")->failures == 1);
    CHECK(s.next() == t0 + 1s);
}

TEST_CASE("lost locks: a copy (what the flush threads get) keeps the devices lost when it was taken") {
    LostLocks s(1s, 30s);
    s.failed("a", t0);
    const LostLocks copy = s;
    s.back("a");
    s.failed("b", t0);
    CHECK(copy.lost("a"));
    CHECK_FALSE(copy.lost("b"));
    CHECK_FALSE(s.lost("a"));
}
