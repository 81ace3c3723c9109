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
//   - a nap that paid is then lengthened, doubling one sample at a time up
//     to longest_factor times the configured nap, while each longer nap
//     cuts the CPU per request to step_gain of the shorter one's or less
//     and keeps step_rate of its rate: a client with a deep queue (iodepth
//     64) sends as fast while the loop naps 400 us as 50 us, and the loop
//     wakes for 8 times the requests; one with 16 in flight runs dry in a
//     long nap. The first longer nap that does not pay ends the climb;
//   - napping, every sample must still gather min_batch requests a nap, and
//     every recheck_samples the rate without naps is measured afresh (and
//     the climb starts again from the configured nap).
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
    static constexpr unsigned longest_factor = 8;
    static constexpr double step_gain = 0.95;
    static constexpr double step_rate = 0.97;
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

    std::uint64_t trials() const { return trials_; }           // `auto` tried napping
    std::uint64_t kept() const { return kept_; }               // ... and it paid
    std::uint64_t lengthened() const { return lengthened_; }   // ... and a longer nap paid too

private:
    enum class State { off,
                       trial,    // napping the configured nap, to see whether it pays
                       on,       // napping, at nap_
                       longer,   // napping twice nap_, to see whether that pays more
    };
    // Starts a sample at `now` in `state`.
    void start(State state, Clock::time_point now, const stats::LoopActivity& activity);
    // After a sample whose naps paid: try a longer nap, unless nap_ is the longest.
    void climb(Clock::time_point now, const stats::LoopActivity& activity);
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
    Micros nap_{};              // the nap that paid (from the configured one up)
    double rate_on_ = 0;        // requests per second napping nap_, last measured
    double cpu_on_ = 0;         // CPU seconds per request napping nap_, last measured
    unsigned samples_on_ = 0;   // samples napping since the last measure without
    Clock::time_point hold_until_{};
    Clock::duration hold_ = first_hold;
    std::uint64_t trials_ = 0;
    std::uint64_t kept_ = 0;
    std::uint64_t lengthened_ = 0;
};

}   // namespace nbdsched::daemon
