#include "daemon/inflight_budget.hpp"

#include <algorithm>

namespace nbdsched::daemon {

InflightBudget::InflightBudget(std::uint64_t max_requests, std::uint64_t max_bytes)
    : max_requests_(max_requests), max_bytes_(max_bytes) {}

void InflightBudget::take_request() {
    ++requests_;
    peak_requests_ = std::max(peak_requests_, requests_);
}

void InflightBudget::take_bytes(std::uint64_t n) {
    bytes_ += n;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
}

void InflightBudget::give(std::uint64_t bytes) {
    --requests_;
    bytes_ -= bytes;
    if (full() || waiters_.empty()) return;
    // All of them, not one: a woken connection may have nothing to read and
    // leave the room unused, and nothing else would wake the others then.
    // Those that find it full again register again, behind the rest.
    std::vector<std::weak_ptr<Waiter>> woken;
    woken.swap(waiters_);
    for (auto& w : woken)
        if (auto alive = w.lock()) alive->budget_available();
}

void InflightBudget::wait(std::weak_ptr<Waiter> waiter) {
    ++waits_;
    waiters_.push_back(std::move(waiter));
}

InflightBudget::Stats InflightBudget::stats() const {
    return {requests_, bytes_, peak_requests_, peak_bytes_, waits_};
}

} // namespace nbdsched::daemon
