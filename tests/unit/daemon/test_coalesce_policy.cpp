// The event loop's nap policy (limits.coalesce), driven by a simulated
// client: a fixed nap naps whenever asked; `auto` naps only where naps
// gather batches, cut the loop's CPU per request and keep the request rate,
// lengthens a nap while a longer one cuts the CPU further at the same rate,
// and never naps for a timed device.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>

#include "daemon/process/coalesce_policy.hpp"

using nbdsched::config::Limits;
using nbdsched::config::LoopWindow;
using nbdsched::daemon::CoalescePolicy;
using nbdsched::daemon::stats::LoopActivity;
using namespace std::chrono_literals;

namespace {

// How a client's requests come, with and without naps: requests per second,
// and the loop's CPU time per request.
struct ClientLoad {
    double rate = 60000;
    double cpu_per_request = 14e-6;
    double napping_rate = 60000;
    double napping_cpu_per_request = 8e-6;
    bool timed = false;
    // Optional: the loop's CPU per wake-up after a nap, shared by the
    // requests the nap gathered (a longer nap, a cheaper request) ...
    double cpu_per_wake = 0;
    // ... and the client's queue depth: a nap gathers at most that many,
    // the client waiting for its replies meanwhile (0: no bound).
    double depth = 0;

    // Requests per second while the loop naps `nap` at a time.
    double napping_rate_for(std::chrono::duration<double> nap) const {
        return depth == 0 ? napping_rate : std::min(napping_rate, depth / nap.count());
    }
};

// A loop serving `load` on a fake clock: each turn without a nap serves one
// request, each nap gathers what the napping rate brings in the nap.
struct NappingLoop {
    CoalescePolicy::Clock::time_point now{};
    CoalescePolicy::Clock::duration cpu{};
    LoopActivity activity;
    CoalescePolicy policy;
    std::uint64_t naps = 0;
    double carry = 0;   // a fraction of a request still to come

    explicit NappingLoop(const LoopWindow& settings) : policy(settings, [this] { return cpu; }) {}

    void run(CoalescePolicy::Clock::duration span, const ClientLoad& load) {
        const auto end = now + span;
        while (now < end) {
            const auto nap = policy.nap(now, activity);
            const bool napped = nap.count() != 0;
            naps += napped;
            const double rate = napped ? load.napping_rate_for(nap) : load.rate;
            const auto step = napped ? std::chrono::duration<double>(nap) : std::chrono::duration<double>(1 / rate);
            carry += rate * step.count();
            const auto served = static_cast<std::uint64_t>(carry);
            carry -= static_cast<double>(served);
            activity.requests += served;
            if (load.timed) activity.timed_requests += served;
            const double per = napped ? load.napping_cpu_per_request : load.cpu_per_request;
            const double wake = napped && served != 0 ? load.cpu_per_wake : 0;
            cpu += std::chrono::duration_cast<CoalescePolicy::Clock::duration>(
                std::chrono::duration<double>(per * static_cast<double>(served) + wake));
            now += std::chrono::duration_cast<CoalescePolicy::Clock::duration>(step);
        }
    }
    // Naps over the next `span` of the same load.
    std::uint64_t naps_in(CoalescePolicy::Clock::duration span, const ClientLoad& load) {
        const auto before = naps;
        run(span, load);
        return naps - before;
    }
};

const LoopWindow auto_naps = Limits::coalesce_auto;

}   // namespace

TEST_CASE("a fixed nap naps whenever the loop asks, whatever it gathers") {
    NappingLoop loop(LoopWindow{50us, false});
    ClientLoad trickle{.rate = 100, .napping_rate = 100};
    loop.run(100ms, trickle);
    CHECK(loop.naps > 0);
    CHECK(loop.policy.nap(loop.now, loop.activity) == 50us);
    CHECK(loop.policy.trials() == 0);
}

TEST_CASE("auto never tries a nap that would gather fewer than two requests") {
    NappingLoop loop(auto_naps);
    // 25,000 a second: 1.25 requests in a 50 us nap (one at a time, iodepth 1).
    loop.run(1s, ClientLoad{.rate = 25000, .napping_rate = 25000});
    CHECK(loop.naps == 0);
    CHECK(loop.policy.trials() == 0);
}

TEST_CASE("auto naps on while naps gather batches, save CPU and keep the rate") {
    NappingLoop loop(auto_naps);
    const ClientLoad streaming;   // 60,000 a second; 14 us of CPU a request, 8 us napping
    loop.run(100ms, streaming);
    CHECK(loop.policy.kept() == 1);
    CHECK(loop.policy.nap(loop.now, loop.activity) == Limits::coalesce_auto.window);
    // Napping but for a sample without naps now and then, to measure afresh.
    const auto span = CoalescePolicy::sample * CoalescePolicy::recheck_samples * 4;
    const auto naps = loop.naps_in(span, streaming);
    const auto most = span / Limits::coalesce_auto.window;
    CHECK(naps > most * 8 / 10);
    CHECK(loop.policy.kept() >= 3);
}

// A client with 64 requests in flight: a nap's wake-up (20 us of the loop's
// CPU) is shared by all it gathered, and the client keeps sending.
const ClientLoad deep_queue{.napping_cpu_per_request = 4e-6, .cpu_per_wake = 20e-6, .depth = 64};

TEST_CASE("auto lengthens a nap that paid while longer ones cut the CPU further and keep the rate") {
    NappingLoop loop(auto_naps);
    loop.run(100ms, deep_queue);
    CHECK(loop.policy.kept() == 1);
    CHECK(loop.policy.lengthened() == 3);   // 50 -> 100 -> 200 -> 400 us, and no further
    CHECK(loop.policy.nap(loop.now, loop.activity) == CoalescePolicy::longest_factor * Limits::coalesce_auto.window);
}

TEST_CASE("auto stops lengthening the nap where a longer one would cost rate") {
    // 8 in flight at 60,000 a second: 6 come in 100 us; a 200 us nap would
    // gather the 8 and leave the client waiting, at 40,000 a second.
    // 11 in flight: a 200 us nap would cut the CPU per request by a fifth
    // and the rate to 55,000 a second, within kept_rate of the rate without
    // naps but less than the 100 us nap's.
    for (const double depth : {8.0, 11.0}) {
        CAPTURE(depth);
        NappingLoop loop(auto_naps);
        ClientLoad shallower = deep_queue;
        shallower.depth = depth;
        loop.run(100ms, shallower);
        CHECK(loop.policy.kept() == 1);
        CHECK(loop.policy.lengthened() == 1);
        CHECK(loop.policy.nap(loop.now, loop.activity) == 2 * Limits::coalesce_auto.window);
        // The climb starts afresh after each measure without naps, and stops there again.
        loop.run(CoalescePolicy::sample * CoalescePolicy::recheck_samples * 3, shallower);
        CHECK(loop.policy.kept() >= 3);
        CHECK(loop.policy.lengthened() == loop.policy.kept());
    }
}

TEST_CASE("auto keeps the configured nap when a longer one saves no more CPU") {
    NappingLoop loop(auto_naps);
    loop.run(100ms, ClientLoad{});   // 8 us a request napping, however long the nap
    CHECK(loop.policy.kept() == 1);
    CHECK(loop.policy.lengthened() == 0);
    CHECK(loop.policy.nap(loop.now, loop.activity) == Limits::coalesce_auto.window);
}

TEST_CASE("auto stops napping when the client sends less while the loop naps, and holds off longer each time") {
    NappingLoop loop(auto_naps);
    // A client that waits for its replies: it sends a quarter less while the loop naps.
    const ClientLoad waiting{.napping_rate = 45000, .napping_cpu_per_request = 7e-6};
    loop.run(30ms, waiting);
    REQUIRE(loop.policy.trials() == 1);
    CHECK(loop.policy.kept() == 0);
    // The first hold: no trial for first_hold (from the trial's end, ~10 ms), then one.
    loop.run(CoalescePolicy::first_hold - 40ms, waiting);
    CHECK(loop.policy.trials() == 1);
    loop.run(60ms, waiting);
    CHECK(loop.policy.trials() == 2);
    // Then twice as long.
    loop.run(2 * CoalescePolicy::first_hold - 40ms, waiting);
    CHECK(loop.policy.trials() == 2);
    loop.run(60ms, waiting);
    CHECK(loop.policy.trials() == 3);
    CHECK(loop.policy.kept() == 0);
}

TEST_CASE("auto stops napping when naps do not cut the CPU a request costs") {
    NappingLoop loop(auto_naps);
    loop.run(1s, ClientLoad{.napping_cpu_per_request = 13e-6});
    CHECK(loop.policy.trials() >= 1);
    CHECK(loop.policy.kept() == 0);
    // Held off most of the time: the trials' samples are all it napped.
    CHECK(loop.naps < loop.policy.trials() * (CoalescePolicy::sample / Limits::coalesce_auto.window + 1));
}

TEST_CASE("auto stops napping when the load changes to fewer requests a nap") {
    NappingLoop loop(auto_naps);
    loop.run(100ms, ClientLoad{});
    REQUIRE(loop.policy.kept() == 1);
    // A trickle now: a nap gathers one request at most.
    loop.run(20ms, ClientLoad{.rate = 10000, .napping_rate = 10000});
    CHECK(loop.naps_in(100ms, ClientLoad{.rate = 10000, .napping_rate = 10000}) == 0);
}

TEST_CASE("auto never naps for a loop serving a timed device") {
    NappingLoop loop(auto_naps);
    loop.run(1s, ClientLoad{.timed = true});
    CHECK(loop.naps == 0);
    CHECK(loop.policy.trials() == 0);
}
