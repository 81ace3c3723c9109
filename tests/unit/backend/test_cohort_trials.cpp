// Whether cohorts pay with the clients a device has, found by trying
// (backend/cohort_trials.hpp): a pure rule, driven here by a made-up disk
// whose completion rate with and without cohorts the test chooses.
#include <doctest/doctest.h>

#include <utility>
#include <vector>

#include "backend/cohort_trials.hpp"

using namespace nbdsched::backend;
using Nanos = CohortTrials::Nanos;

namespace {
constexpr std::uint64_t k_trial_reaps = 2 * CohortTrials::k_pairs * (CohortTrials::k_settle + CohortTrials::k_window);
constexpr std::size_t k_per_reap = 32;

// A disk that completes k_per_reap requests a reap at `with` or `without`
// requests a second, as the trials' current choice says; the rates may
// change from pair to pair (`rates` is cycled through, a pair each).
struct Disk {
    CohortTrials trials;
    Nanos now{1'000'000'000};
    std::vector<std::pair<double, double>> rates{{100'000, 100'000}};
    std::size_t pair = 0;
    bool was_off = false;

    void reap(bool passes = true) {
        const bool off = trials.off();
        if (was_off && !off) ++pair;   // a new pair begins with cohorts
        was_off = off;
        const auto& [with, without] = rates[pair % rates.size()];
        now += Nanos(static_cast<std::int64_t>(1e9 * k_per_reap / (off ? without : with)));
        trials.reaped(now, k_per_reap, passes);
    }
    void reaps(std::uint64_t n, bool passes = true) {
        for (std::uint64_t i = 0; i < n; ++i) reap(passes);
    }
    // Up to the end of the first trial: its verdict.
    bool first_trial_holds_off() {
        reaps(CohortTrials::k_first + k_trial_reaps);
        REQUIRE(trials.trials() == 1);
        return trials.off();
    }
};

bool first_trial_holds_off(std::vector<std::pair<double, double>> rates) {
    Disk d;
    d.rates = std::move(rates);
    return d.first_trial_holds_off();
}
}   // namespace

TEST_CASE("cohort trials: nothing is tried until the disk has run passes for a while") {
    Disk d;
    d.reaps(10 * CohortTrials::k_first, false);   // no passes: cohorts are off anyway
    CHECK(d.trials.trials() == 0);
    CHECK_FALSE(d.trials.off());
    d.reaps(CohortTrials::k_first - 1);
    CHECK_FALSE(d.trials.off());
    // The first window, with cohorts, ends: the second is without.
    d.reaps(1 + CohortTrials::k_settle + CohortTrials::k_window);
    CHECK(d.trials.off());
    d.reaps(k_trial_reaps);
    CHECK(d.trials.trials() == 1);
}

TEST_CASE("cohort trials: clients served faster without cohorts have them held off until the next trial") {
    Disk d;
    d.rates = {{100'000, 130'000}};
    CHECK(d.first_trial_holds_off());
    CHECK(d.trials.held_off() == 1);
    // Held off between trials, whatever the rates do meanwhile.
    d.rates = {{130'000, 100'000}};
    d.reaps(CohortTrials::k_between - 1);
    CHECK(d.trials.off());
    CHECK(d.trials.trials() == 1);
    // The next trial finds cohorts paying again: back on.
    d.reaps(1 + k_trial_reaps);
    CHECK(d.trials.trials() == 2);
    CHECK_FALSE(d.trials.off());
    CHECK(d.trials.held_off() == 1);
}

TEST_CASE("cohort trials: a gain within the margin, or one noisy pair, keeps cohorts on") {
    CHECK_FALSE(first_trial_holds_off({{100'000, 105'000}}));   // 5 % faster without, every pair
    // One pair three times faster without, the other three 30 % slower.
    CHECK_FALSE(first_trial_holds_off({{100'000, 300'000}, {100'000, 70'000}, {100'000, 70'000}, {100'000, 70'000}}));
    CHECK(first_trial_holds_off({{100'000, 110'000}}));   // 10 % faster without, every pair: held off
}

TEST_CASE("cohort trials: the reaps right after a switch are not measured") {
    // The other way's passes still run for a while after a switch: here the
    // settling reaps of every window are ten times slower without cohorts
    // and ten times faster with, which would turn the verdict if measured.
    CohortTrials t;
    Nanos now{1'000'000'000};
    std::uint64_t since_switch = 0;
    bool was_off = false;
    for (std::uint64_t i = 0; i < CohortTrials::k_first + k_trial_reaps; ++i) {
        const bool off = t.off();
        since_switch = off == was_off ? since_switch + 1 : 0;
        was_off = off;
        const bool settling = since_switch < CohortTrials::k_settle;
        const double rate = off ? (settling ? 13'000 : 130'000) : (settling ? 1'000'000 : 100'000);
        now += Nanos(static_cast<std::int64_t>(1e9 * k_per_reap / rate));
        t.reaped(now, k_per_reap, true);
    }
    CHECK(t.trials() == 1);
    CHECK(t.off());
}

TEST_CASE("cohort trials: a disk that stops running passes starts afresh, cohorts not held off") {
    Disk d;
    d.rates = {{100'000, 130'000}};
    REQUIRE(d.first_trial_holds_off());
    d.reap(false);
    CHECK_FALSE(d.trials.off());
    // Passes again: on until a trial says otherwise, k_first reaps away.
    d.reaps(CohortTrials::k_first);
    CHECK_FALSE(d.trials.off());
    d.reaps(k_trial_reaps);
    CHECK(d.trials.off());
    CHECK(d.trials.trials() == 2);
}

TEST_CASE("cohort trials: a clock that does not move decides nothing") {
    CohortTrials t;
    for (std::uint64_t i = 0; i < CohortTrials::k_first + 2 * k_trial_reaps; ++i) t.reaped(Nanos(5), k_per_reap, true);
    CHECK(t.trials() == 1);
    CHECK_FALSE(t.off());
}
