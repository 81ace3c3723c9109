// Whether cohorts (submission_cohorts.hpp) pay with the clients a device
// has now, found by trying them. They keep a disk that runs passes busy
// while a client turns its replies round, at the price of a pass's fixed
// costs twice per queue depth (two interrupts, two wake-ups of the loop,
// more system calls). Which weighs more depends on the client: fio's nbd
// engine sends one request per system call, its successors come back over
// about a pass, and cohorts took it from 0.56x to 0.80x of fio on the file
// on one host; nbdsched-load, which sends its requests in batches, was
// served 1.3-1.5x faster without them at queue depth 16
// (docs/file-backend-io.md). Timing the client's turnaround did not tell
// the two apart (the cohorts' own work stretches it), so a trial measures
// what counts: completions a second with cohorts and without, in
// alternating windows. The first k_settle reaps after a switch are not
// measured (the other way's passes are still running; measured from the
// switch, windows with cohorts came out 14 % faster than without where
// they are 8 % slower). Cohorts are held off until the next trial when,
// over the trial's pairs of windows, those without them completed more
// than k_margin more a second (geometric mean of the pairs' ratios): the
// host's noise moves one window by a third, so one pair decides nothing.
// Pure: the engine passes the time of each reap.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace nbdsched::backend {

class CohortTrials {
public:
    using Nanos = std::chrono::nanoseconds;
    static constexpr std::uint64_t k_first = 512;       // reaps with passes before the first trial
    static constexpr std::uint64_t k_between = 65536;   // reaps from one trial to the next
    static constexpr unsigned k_pairs = 4;              // per trial: with, without, with, ...
    static constexpr std::uint64_t k_settle = 128;      // reaps after a switch, not measured
    static constexpr std::uint64_t k_window = 512;      // reaps measured per window
    static constexpr double k_margin = 1.0 / 16;

    // Completions reaped at `now`, `done` of them. `passes`: the disk runs
    // passes (SubmissionCohorts::passes()); while it does not, cohorts are
    // off anyway, nothing is tried, and the next passes start afresh.
    void reaped(Nanos now, std::size_t done, bool passes);
    // Cohorts are held off now: in a window without them, or the last trial
    // found them costly.
    bool off() const { return trying_ ? window_ % 2 == 1 : settled_off_; }
    // Trials finished, and of them those that held cohorts off (tests, logs).
    std::uint64_t trials() const { return trials_; }
    std::uint64_t held_off() const { return held_off_; }

private:
    void end_window(Nanos now);

    std::uint64_t countdown_ = k_first;   // reaps before the next trial
    bool trying_ = false;
    bool settled_off_ = false;
    unsigned window_ = 0;   // this trial's window: even with cohorts, odd without
    Nanos window_from_{0};
    std::uint64_t window_reaps_ = 0;   // since the switch, settling ones included
    std::uint64_t window_done_ = 0;
    double with_rate_ = 0;   // completions a second in the pair's window with cohorts
    double log_gain_ = 0;    // sum over the pairs of log(without / with)
    bool measured_ = true;   // every window so far completed something
    std::uint64_t trials_ = 0;
    std::uint64_t held_off_ = 0;
};

}   // namespace nbdsched::backend
