#include "daemon/process/coalesce_policy.hpp"

#include <algorithm>

namespace nbdsched::daemon {

CoalescePolicy::Micros CoalescePolicy::nap(Clock::time_point now, const stats::LoopActivity& activity) {
    if (!settings_.adaptive) return settings_.window;
    if (!started_) {
        started_ = true;
        start(State::off, now, activity);
    }
    if (now - sample_start_ >= sample) judge(now, activity);
    if (state_ == State::off) return Micros(0);
    ++naps_;
    return state_ == State::longer ? 2 * nap_ : nap_;
}

void CoalescePolicy::start(State state, Clock::time_point now, const stats::LoopActivity& activity) {
    state_ = state;
    sample_start_ = now;
    at_start_ = activity;
    cpu_at_start_ = thread_cpu_();
    naps_ = 0;
}

void CoalescePolicy::judge(Clock::time_point now, const stats::LoopActivity& activity) {
    const double seconds = std::chrono::duration<double>(now - sample_start_).count();
    const auto requests = static_cast<double>(activity.requests - at_start_.requests);
    const bool timed = activity.timed_requests != at_start_.timed_requests;
    const double rate = requests / seconds;
    const double per_nap = naps_ == 0 ? 0 : requests / static_cast<double>(naps_);
    const double cpu = std::chrono::duration<double>(thread_cpu_() - cpu_at_start_).count() / std::max(requests, 1.0);
    const double window = std::chrono::duration<double>(settings_.window).count();
    // A sample's naps paid: batches of min_batch, the CPU per request down
    // to `cpu_bound` and the rate up to `rate_bound`, no timed device.
    const auto paid = [&](double cpu_bound, double rate_bound) {
        return !timed && per_nap >= min_batch && cpu <= cpu_bound && rate >= rate_bound;
    };
    switch (state_) {
    case State::off:
        rate_off_ = rate;
        cpu_off_ = cpu;
        nap_ = settings_.window;
        if (!timed && now >= hold_until_ && rate * window >= min_batch) {
            ++trials_;
            return start(State::trial, now, activity);
        }
        return start(State::off, now, activity);
    case State::trial:
        if (paid(cpu_gain * cpu_off_, kept_rate * rate_off_)) {
            ++kept_;
            hold_ = first_hold;
            samples_on_ = 0;
            rate_on_ = rate;
            cpu_on_ = cpu;
            return climb(now, activity);
        }
        hold_until_ = now + hold_;
        hold_ = std::min(2 * hold_, max_hold);
        return start(State::off, now, activity);
    case State::longer:
        if (paid(step_gain * cpu_on_, step_rate * rate_on_)) {
            ++lengthened_;
            nap_ *= 2;
            rate_on_ = rate;
            cpu_on_ = cpu;
            return climb(now, activity);
        }
        return start(State::on, now, activity);
    case State::on:
        // The load changed (fewer requests a nap), or it is time to measure
        // the rate without naps again: back to not napping, no hold.
        if (timed || per_nap < min_batch || ++samples_on_ >= recheck_samples) return start(State::off, now, activity);
        return start(State::on, now, activity);
    }
}

void CoalescePolicy::climb(Clock::time_point now, const stats::LoopActivity& activity) {
    start(2 * nap_ <= longest_factor * settings_.window ? State::longer : State::on, now, activity);
}

}   // namespace nbdsched::daemon
