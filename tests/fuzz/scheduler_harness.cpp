#include "tests/fuzz/scheduler_harness.hpp"

#include <algorithm>
#include <chrono>

#include "tests/fuzz/check.hpp"

namespace nbdsched::fuzz {

using namespace std::chrono_literals;

void SchedulerHarness::complete(std::size_t pick) {
    if (at_device_.empty()) return;
    pick %= at_device_.size();
    sched::RequestId id = at_device_[pick];
    at_device_.erase(at_device_.begin() + static_cast<std::ptrdiff_t>(pick));
    s_->complete(id, now_);
    ++completed_;
    after_event();
}

void SchedulerHarness::advance(Nanos by) {
    const sched::Time target = now_ + by;
    while (auto w = s_->next_wakeup()) {
        if (*w > target) break;
        now_ = std::max(now_, *w);
        after_event();
    }
    now_ = target;
    after_event();
}

void SchedulerHarness::finish(Nanos limit) {
    const sched::Time deadline = now_ + limit;
    for (unsigned step = 0; step < 1'000'000 && (waiting() != 0 || !at_device_.empty()); ++step) {
        if (!at_device_.empty()) {
            now_ += 100us;
            complete(0);
            continue;
        }
        auto w = s_->next_wakeup();
        FUZZ_CHECK(w.has_value());   // queued work with an idle device needs a timer
        FUZZ_CHECK(*w <= deadline);
        now_ = std::max(now_, *w);
        after_event();
    }
    FUZZ_CHECK(waiting() == 0 && at_device_.empty());
    FUZZ_CHECK(s_->queued() == 0 && s_->in_flight() == 0);
    FUZZ_CHECK(completed_ == next_id_ - 1);
}

void SchedulerHarness::after_event() {
    for (int round = 0;; ++round) {
        bool progress = drain();
        auto w = s_->next_wakeup();
        if (w) FUZZ_CHECK(*w >= now_);   // no wakeup in the past
        if (!w || *w > now_) break;
        // Asked to be called again right now: that call must achieve
        // something, or the daemon's timer would spin at one instant.
        FUZZ_CHECK(progress || round < 2);
    }
    FUZZ_CHECK(s_->queued() == waiting());
    FUZZ_CHECK(s_->in_flight() == at_device_.size());
    if (waiting() != 0 && at_device_.empty()) FUZZ_CHECK(s_->next_wakeup().has_value());
}

bool SchedulerHarness::drain() {
    bool any = false;
    while (auto r = s_->dispatch(now_)) {
        FUZZ_CHECK(dispatched_.insert(r->id).second);   // exactly once
        dispatched(*r);
        at_device_.push_back(r->id);
        FUZZ_CHECK(s_->in_flight() <= depth_);
        FUZZ_CHECK(at_device_.size() <= depth_);
        any = true;
    }
    return any;
}

}   // namespace nbdsched::fuzz
