// The event loop's polling policy (limits.busy_poll): a fixed window always
// polls; `auto` stops when polls do not find work or are preempted, and
// tries again after a number of sleeps that doubles while it still does
// not pay; work found at once pays only for a client whose requests a sleep
// gathers one a turn (it waits for each reply), looked at again now and then.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>

#include "daemon/process/busy_poll_policy.hpp"

using nbdsched::config::Limits;
using nbdsched::config::LoopWindow;
using nbdsched::daemon::BusyPollPolicy;
using std::chrono::microseconds;

namespace {

const LoopWindow automatic = Limits::busy_poll_auto;
// Work found after this long saved a sleep.
const microseconds late = BusyPollPolicy::min_saved_wait + microseconds(20);

// Feeds `n` polls with the same outcome; returns how many of them the
// policy let poll (the others it had the loop sleep at once).
unsigned feed(BusyPollPolicy& p, unsigned n, bool found, bool preempted) {
    unsigned polled = 0;
    for (unsigned i = 0; i < n; ++i) {
        if (p.window().count() == 0) continue;
        ++polled;
        p.polled(found, found ? late : microseconds(0), preempted);
    }
    return polled;
}

// Sleeps until the policy polls again; returns how many it skipped.
std::uint64_t skipped(BusyPollPolicy& p) {
    std::uint64_t n = 0;
    while (p.window().count() == 0) ++n;
    return n;
}

}   // namespace

TEST_CASE("a fixed window polls after every sleep, whatever the polls find") {
    BusyPollPolicy p(LoopWindow{microseconds(50), false});
    CHECK(feed(p, 1000, false, true) == 1000);
    CHECK(p.window() == microseconds(50));
    CHECK(p.backoffs() == 0);
}

TEST_CASE("auto keeps polling while most polls find work") {
    BusyPollPolicy p(automatic);
    for (int i = 0; i < 1000; ++i) {
        REQUIRE(p.window() == Limits::busy_poll_auto.window);
        p.polled(i % 3 != 0, late, i % 7 == 0);   // two in three find work; one in seven preempted
    }
    CHECK(p.backoffs() == 0);
}

TEST_CASE("auto stops polling when polls find nothing, and backs off further while they still do not") {
    BusyPollPolicy p(automatic);
    CHECK(feed(p, BusyPollPolicy::judged_polls, false, false) == BusyPollPolicy::judged_polls);
    CHECK(p.backoffs() == 1);
    CHECK(skipped(p) == BusyPollPolicy::first_skip);
    // The next trial fails too: twice as long, up to the cap.
    std::uint64_t expect = BusyPollPolicy::first_skip;
    for (int round = 0; round < 12; ++round) {
        feed(p, BusyPollPolicy::judged_polls - 1, false, false);
        p.polled(false, microseconds(0), false);
        expect = std::min(2 * expect, BusyPollPolicy::max_skip);
        CHECK(skipped(p) == expect);
    }
    CHECK(expect == BusyPollPolicy::max_skip);
}

TEST_CASE("auto stops polling when polls find work at once (a streaming client: sleeping batches better)") {
    BusyPollPolicy p(automatic);
    for (unsigned i = 0; i < BusyPollPolicy::judged_polls; ++i) p.polled(true, microseconds(1), false);
    CHECK(p.backoffs() == 1);
    CHECK(p.window().count() == 0);
}

TEST_CASE("auto stops polling when a quarter of the polls are preempted, even if they find work") {
    BusyPollPolicy p(automatic);
    for (unsigned i = 0; i < BusyPollPolicy::judged_polls; ++i) p.polled(true, late, i % 3 == 0);   // 6 of 16
    CHECK(p.backoffs() == 1);
    CHECK(p.window().count() == 0);
}

TEST_CASE("auto, once polling pays again, backs off briefly after the next failure") {
    BusyPollPolicy p(automatic);
    for (int round = 0; round < 4; ++round) {   // back off four times: skip 16, 32, 64, 128
        feed(p, BusyPollPolicy::judged_polls, false, false);
        skipped(p);
    }
    CHECK(p.backoffs() == 4);
    feed(p, BusyPollPolicy::judged_polls, true, false);    // pays
    feed(p, BusyPollPolicy::judged_polls, false, false);   // fails again
    CHECK(skipped(p) == BusyPollPolicy::first_skip);
}

TEST_CASE("while auto pauses, each turn of the loop counts toward the pause; then it polls again") {
    BusyPollPolicy p(automatic);
    CHECK_FALSE(p.skip_turn());   // polling: the loop looks for work before it sleeps
    feed(p, BusyPollPolicy::judged_polls, false, false);
    REQUIRE(p.backoffs() == 1);
    std::uint64_t turns = 0;
    while (p.skip_turn()) ++turns;
    CHECK(turns == BusyPollPolicy::first_skip);
    CHECK(p.window() == Limits::busy_poll_auto.window);
}

TEST_CASE("a fixed window never pauses") {
    BusyPollPolicy p(LoopWindow{microseconds(50), false});
    feed(p, 1000, false, true);
    CHECK_FALSE(p.skip_turn());
}

namespace {

// Runs the pause in progress, each turn gathering `requests` (every other
// turn gathers none: a reply's write completing, say).
void pause_gathering(BusyPollPolicy& p, std::uint64_t requests) {
    for (std::uint64_t turn = 0; p.skip_turn(); ++turn) p.slept(turn % 2 == 0 ? requests : 0);
}

// One judgement of polls that all found work at once (sooner than min_saved_wait).
void quick_finds(BusyPollPolicy& p) {
    for (unsigned i = 0; i < BusyPollPolicy::judged_polls; ++i) {
        REQUIRE(p.window().count() != 0);
        p.polled(true, microseconds(1), false);
    }
}

// After a pause that showed a streaming client: polling resumes under the
// streaming rule, so a judgement of quick finds is a failure again, the
// `backoffs`th.
void quick_finds_back_off(BusyPollPolicy& p, std::uint64_t backoffs) {
    CHECK(p.window().count() != 0);
    CHECK(p.sleeps_gather());
    for (unsigned i = 0; i < BusyPollPolicy::judged_polls; ++i) p.polled(true, microseconds(1), false);
    CHECK(p.backoffs() == backoffs);
}

}   // namespace

TEST_CASE("auto keeps polling for a client that waits for each reply, even when its next request comes at once") {
    BusyPollPolicy p(automatic);
    quick_finds(p);   // taken for a streaming client at first
    REQUIRE(p.backoffs() == 1);
    pause_gathering(p, 1);   // but a sleep gathers one request a turn: nothing to batch
    for (unsigned j = 1; j < BusyPollPolicy::recheck_judgements; ++j) quick_finds(p);
    CHECK(p.backoffs() == 1);
    CHECK_FALSE(p.sleeps_gather());
    // Every recheck_judgements paying judgements it pauses once to look again, without counting a failure.
    quick_finds(p);
    CHECK(p.window().count() == 0);
    CHECK(p.backoffs() == 1);
}

TEST_CASE("auto keeps the streaming rule when a pause gathers several requests a turn") {
    BusyPollPolicy p(automatic);
    quick_finds(p);
    pause_gathering(p, 2);   // 2 a turn: a sleep batches the client's requests
    quick_finds_back_off(p, 2);
}

TEST_CASE("auto goes back to the streaming rule when a recheck finds the client streaming") {
    BusyPollPolicy p(automatic);
    quick_finds(p);
    pause_gathering(p, 1);
    for (unsigned j = 0; j < BusyPollPolicy::recheck_judgements; ++j) quick_finds(p);
    REQUIRE(p.backoffs() == 1);
    pause_gathering(p, 8);   // the recheck: now a sleep gathers 8 a turn
    quick_finds_back_off(p, 2);
}

TEST_CASE("a pause in which nothing arrived leaves the rule as it was") {
    BusyPollPolicy p(automatic);
    quick_finds(p);
    pause_gathering(p, 0);
    CHECK(p.window().count() != 0);
    CHECK(p.sleeps_gather());
}
