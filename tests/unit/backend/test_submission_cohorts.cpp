// When a loop-driven engine hands its waiting requests to the kernel
// (backend/submission_cohorts.hpp): a pure rule, checked here over the
// depths a device can have; test_file_uring.cpp runs it on a real ring.
#include <doctest/doctest.h>

#include <array>

#include "backend/submission_cohorts.hpp"

using namespace nbdsched::backend;

namespace {
constexpr std::size_t k_min = SubmissionCohorts::k_min_in_kernel;

// What a disk that completes in passes reports: each signal of the ring's
// eventfd brings every request in the kernel.
SubmissionCohorts slow() {
    SubmissionCohorts c;
    for (int i = 0; i < 200; ++i) c.reaped(64, 64, 1);
    REQUIRE(c.on());
    return c;
}
}   // namespace

TEST_CASE("cohorts: off until one signal brings most of the requests in the kernel, off again when few") {
    SubmissionCohorts c;
    CHECK_FALSE(c.on());
    CHECK(c.admit(0, 64) == 64);   // as before: all at once
    CHECK(c.admit(32, 32) == 32);
    CHECK(c.at_completions(40, 1, 24) == 24);
    CHECK(c.chunk() >= 4096);
    for (int i = 0; i < 200; ++i) c.reaped(64, 60, 1);
    CHECK(c.on());
    CHECK(c.chunk() == SubmissionCohorts::k_chunk);
    CHECK(c.admit(0, 64) == 32);
    // Two passes' completions found by one reap: half of them a signal, stays on.
    for (int i = 0; i < 200; ++i) c.reaped(64, 64, 2);
    CHECK(c.on());
    for (int i = 0; i < 200; ++i) c.reaped(64, 64, 32);
    CHECK_FALSE(c.on());
    CHECK(c.admit(0, 64) == 64);
}

// The case the time in the kernel got wrong: a device as fast as a loop
// device over tmpfs, its completions waiting long for a busy daemon, comes
// a few completions a signal; now and then the daemon's thread runs the
// kernel's task work late and one signal brings them all (a quarter of the
// reaps on the loop device). Cohorts stay off.
TEST_CASE("cohorts: a device that completes one by one keeps them off, whatever the daemon's delay") {
    SubmissionCohorts c;
    for (int i = 0; i < 4000; ++i) {
        if (i % 4 == 0)
            c.reaped(64, 64, 1);
        else
            c.reaped(64, 12, 6);
        REQUIRE_FALSE(c.on());
    }
    // Runs of late reaps do not turn them on either.
    for (int i = 0; i < 8; ++i) c.reaped(64, 64, 1);
    CHECK_FALSE(c.on());
}

TEST_CASE("cohorts: below the least depth, and without the signals, reaps say nothing") {
    SubmissionCohorts c;
    for (int i = 0; i < 1000; ++i) c.reaped(SubmissionCohorts::k_min_in_kernel - 1, 4, 1);   // one of one is all
    for (int i = 0; i < 1000; ++i) c.reaped(64, 64, 0);
    CHECK_FALSE(c.on());
    CHECK(c.share() == 0);
    SubmissionCohorts on = slow();
    for (int i = 0; i < 1000; ++i) on.reaped(4, 1, 4);
    for (int i = 0; i < 1000; ++i) on.reaped(64, 1, 0);
    CHECK(on.on());
}

TEST_CASE("cohorts: at a low queue depth every request goes at once") {
    SubmissionCohorts c = slow();
    CHECK(c.admit(0, 1) == 1);
    CHECK(c.admit(0, 4) == 4);
    CHECK(c.admit(1, 1) == 1);
    CHECK(c.admit(3, 5) == 5);
    CHECK(c.admit(0, k_min) == k_min);
    CHECK(c.at_completions(4, 4, 4) == 4);
    CHECK(c.at_completions(4, 1, 3) == 3);
}

TEST_CASE("cohorts: a burst at an idle disk makes two cohorts; the second waits for the first's completions") {
    SubmissionCohorts c = slow();
    CHECK(c.admit(0, 64) == 32);
    CHECK(c.admit(32, 32) == 0);
    // The disk finished its pass: the second cohort goes in, the first one travels.
    CHECK(c.at_completions(32, 32, 32) == 32);
    // Its requests come back one by one while the second cohort runs: they wait.
    for (std::size_t back = 1; back <= 32; ++back) CHECK(c.admit(32, back) == 0);
    CHECK(c.at_completions(32, 32, 32) == 32);
    CHECK(slow().admit(0, 65) == 33);
    CHECK(slow().admit(0, 16) == 8);
}

TEST_CASE("cohorts: uneven cohorts even out at half the queue depth") {
    SubmissionCohorts c = slow();
    CHECK(c.at_completions(64, 64, 0) == 0);   // a queue depth of 64 seen
    // 22 in the kernel: 10 of the 42 that come back join them, 32 wait.
    CHECK(c.admit(22, 42) == 10);
    // A pass of 22 ends with the 42 waiting: 32 go, 10 wait for the end of the next.
    CHECK(c.at_completions(22, 22, 42) == 32);
}

TEST_CASE("cohorts: a disk that completes one by one keeps its queue depth") {
    SubmissionCohorts c = slow();
    CHECK(c.at_completions(64, 64, 0) == 0);
    // 60 in the kernel, 2 of them done: all 4 waiting go in.
    CHECK(c.at_completions(60, 2, 4) == 4);
    CHECK(c.admit(62, 2) == 0);   // at the end of a turn they wait for the next completions
}

TEST_CASE("cohorts: a shallower client is followed") {
    SubmissionCohorts c = slow();
    CHECK(c.at_completions(64, 64, 0) == 0);
    CHECK(c.admit(0, 16) == 16);   // half the old depth: all of them
    for (int i = 0; i < 400; ++i) c.at_completions(16, 16, 0);
    CHECK(c.admit(0, 16) == 8);
}

TEST_CASE("cohorts: nothing in the kernel means something goes, never more than waits") {
    SubmissionCohorts deep = slow();
    deep.at_completions(4096, 4096, 0);
    const std::array<SubmissionCohorts, 3> states{SubmissionCohorts{}, slow(), deep};
    const std::array<std::size_t, 4> in_kernels{0, 1, 8, 100};
    for (const SubmissionCohorts& c : states) {
        for (std::size_t waiting = 1; waiting <= 4096; ++waiting) {
            CAPTURE(waiting);
            REQUIRE(c.admit(0, waiting) >= 1);   // no completion would come to let it in
            for (std::size_t in_kernel : in_kernels) {
                REQUIRE(c.admit(in_kernel, waiting) <= waiting);
                SubmissionCohorts copy = c;
                const std::size_t now = copy.at_completions(in_kernel, in_kernel, waiting);
                REQUIRE(now >= 1);
                REQUIRE(now <= waiting);
            }
        }
        CHECK(c.admit(0, 0) == 0);
        CHECK(c.admit(5, 0) == 0);
    }
}

// A trial found the clients served faster without cohorts
// (cohort_trials.hpp): every request goes at once, in one call, while the
// share still says the disk runs passes.
TEST_CASE("cohorts: held off, a disk that runs passes gets every request at once") {
    SubmissionCohorts c = slow();
    CHECK(c.at_completions(64, 64, 0) == 0);
    c.hold_off(true);
    CHECK_FALSE(c.on());
    CHECK(c.passes());
    CHECK(c.admit(0, 64) == 64);
    CHECK(c.admit(32, 32) == 32);
    CHECK(c.at_completions(32, 32, 32) == 32);
    CHECK(c.chunk() >= 4096);
    c.hold_off(false);
    CHECK(c.on());
    CHECK(c.admit(0, 64) == 32);
}
