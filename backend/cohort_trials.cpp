#include "backend/cohort_trials.hpp"

#include <cmath>

namespace nbdsched::backend {

void CohortTrials::reaped(Nanos now, std::size_t done, bool passes) {
    if (!passes) {
        countdown_ = k_first;
        trying_ = settled_off_ = false;
        return;
    }
    if (!trying_) {
        if (--countdown_ != 0) return;
        trying_ = true;
        window_ = 0;
        window_reaps_ = window_done_ = 0;
        log_gain_ = 0;
        measured_ = true;
        return;
    }
    if (++window_reaps_ <= k_settle) {
        window_from_ = now;
        return;
    }
    window_done_ += done;
    if (window_reaps_ == k_settle + k_window) end_window(now);
}

void CohortTrials::end_window(Nanos now) {
    const double seconds = std::chrono::duration<double>(now - window_from_).count();
    const double rate = seconds > 0 ? static_cast<double>(window_done_) / seconds : 0;
    if (rate <= 0) measured_ = false;   // a clock that did not move: no judgement
    if (window_ % 2 == 0)
        with_rate_ = rate;
    else if (measured_)
        log_gain_ += std::log(rate / with_rate_);
    window_reaps_ = window_done_ = 0;
    if (++window_ < 2 * k_pairs) return;
    trying_ = false;
    countdown_ = k_between;
    settled_off_ = measured_ && log_gain_ > k_pairs * std::log1p(k_margin);
    ++trials_;
    if (settled_off_) ++held_off_;
}

}   // namespace nbdsched::backend
