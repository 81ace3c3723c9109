// Whether an event loop naps before it waits for more work
// (`limits.coalesce`). A fixed nap naps whenever the loop runs out of work.
// `auto` naps only while it pays, judged on samples of the loop's time:
//   - not napping, it measures the rate requests come at; when a nap at
//     that rate would gather at least min_batch of them, it tries napping
//     for a sample;
//   - the trial pays when its naps gathered min_batch requests each on
//     average, the loop's CPU time per request fell to at most cpu_gain of
//     what it was without naps, and the rate kept to kept_rate of the rate
//     without naps. A client that waits for its replies before it sends
//     more (iodepth 1-4) sends less while the loop naps, and the loop
//     spends as much per request: napping stops, to be tried again after a
//     hold that doubles while it keeps failing;
//   - napping, every sample must still gather min_batch requests a nap, and
//     every recheck_samples the rate without naps is measured afresh.
// No nap while the loop serves a timed device: a nap would delay the
// completions its timing model releases.
// Pure: the loop reads the clock and the counts, this decides.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <utility>

#include "config/config.hpp"
#include "daemon/stats/loop_activity.hpp"

namespace nbdsched::daemon {

class CoalescePolicy {
public:
    using Clock = std::chrono::steady_clock;
    using Micros = std::chrono::microseconds;

    static constexpr Micros sample{5000};
    static constexpr double min_batch = 2.0;
    static constexpr double kept_rate = 0.9;
    static constexpr double cpu_gain = 0.85;
    static constexpr unsigned recheck_samples = 40;
    static constexpr Clock::duration first_hold = std::chrono::milliseconds(100);
    static constexpr Clock::duration max_hold = std::chrono::milliseconds(800);

    // `thread_cpu`: the CPU time the loop's thread has used so far, read at
    // the end of each sample.
    using CpuClock = std::function<Clock::duration()>;
    CoalescePolicy(const config::LoopWindow& settings, CpuClock thread_cpu)
        : settings_(settings), thread_cpu_(std::move(thread_cpu)) {}

    // Called at every turn of the loop while it does not nap, and each time
    // it runs out of work after a nap: how long to nap now (0: no nap).
    Micros nap(Clock::time_point now, const stats::LoopActivity& activity);

    std::uint64_t trials() const { return trials_; }   // `auto` tried napping
    std::uint64_t kept() const { return kept_; }       // ... and it paid

private:
    enum class State { off,
                       trial,
                       on };
    // Starts a sample at `now` in `state`.
    void start(State state, Clock::time_point now, const stats::LoopActivity& activity);
    // Ends a sample whose time is up: the state the next one runs in.
    void judge(Clock::time_point now, const stats::LoopActivity& activity);

    config::LoopWindow settings_;
    CpuClock thread_cpu_;
    State state_ = State::off;
    bool started_ = false;
    Clock::time_point sample_start_{};
    Clock::duration cpu_at_start_{};
    stats::LoopActivity at_start_{};
    std::uint64_t naps_ = 0;    // naps in this sample
    double rate_off_ = 0;       // requests per second without naps, last measured
    double cpu_off_ = 0;        // CPU seconds per request without naps, last measured
    unsigned samples_on_ = 0;   // samples napping since the last measure without
    Clock::time_point hold_until_{};
    Clock::duration hold_ = first_hold;
    std::uint64_t trials_ = 0;
    std::uint64_t kept_ = 0;
};

}   // namespace nbdsched::daemon
