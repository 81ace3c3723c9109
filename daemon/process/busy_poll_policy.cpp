#include "daemon/process/busy_poll_policy.hpp"

#include <algorithm>

namespace nbdsched::daemon {

BusyPollPolicy::Micros BusyPollPolicy::window() {
    if (skip_ == 0) {
        conclude_pause();
        return settings_.window;
    }
    --skip_;
    return Micros(0);
}

void BusyPollPolicy::conclude_pause() {
    if (pause_turns_ == 0) return;   // nothing gathered: nothing learnt
    sleeps_gather_ = 10 * pause_requests_ > streaming_tenths * pause_turns_;
    pause_turns_ = pause_requests_ = 0;
}

void BusyPollPolicy::polled(bool found_work, Micros waited, bool preempted) {
    if (!settings_.adaptive) return;
    ++judged_;
    if (found_work && (waited >= min_saved_wait || !sleeps_gather_)) ++found_;
    if (preempted) ++preempted_;
    if (judged_ < judged_polls) return;
    // Most polls saved a sleep and few delayed another thread (each
    // preempted poll delayed whoever wanted this CPU by up to the window;
    // a rare one is a timer or a niced neighbour): keep polling, and after
    // a later failure wait only briefly before trying again.
    if (2 * found_ > judged_ && 4 * preempted_ <= judged_) {
        next_skip_ = first_skip;
        judged_ = found_ = preempted_ = 0;
        if (!sleeps_gather_ && ++kept_ >= recheck_judgements) {
            kept_ = 0;
            skip_ = first_skip;   // a check, not a failure: backoffs() does not count it
        }
        return;
    }
    back_off();
}

void BusyPollPolicy::back_off() {
    ++backoffs_;
    skip_ = next_skip_;
    next_skip_ = std::min(2 * next_skip_, max_skip);
    judged_ = found_ = preempted_ = 0;
}

}   // namespace nbdsched::daemon
