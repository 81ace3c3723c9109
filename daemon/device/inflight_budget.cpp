#include "daemon/device/inflight_budget.hpp"

#include <algorithm>

namespace nbdsched::daemon {

InflightBudget::InflightBudget(std::uint64_t max_requests, std::uint64_t max_bytes)
    : max_requests_(max_requests), max_bytes_(max_bytes) {}

void InflightBudget::take_request(bool with_ticket) {
    if (with_ticket) --tickets_;
    ++requests_;
    peak_requests_ = std::max(peak_requests_, requests_);
}

void InflightBudget::take_bytes(std::uint64_t n) {
    bytes_ += n;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
    serve_line();   // the last ticket's request is now fully counted
}

void InflightBudget::give(std::uint64_t bytes) {
    --requests_;
    bytes_ -= bytes;
    serve_line();
}

void InflightBudget::return_ticket() {
    --tickets_;
    serve_line();
}

void InflightBudget::wait(std::weak_ptr<Waiter> waiter) {
    ++waits_;
    waiters_.push_back(std::move(waiter));
    // There may be room already: the line only forms behind a dead waiter or
    // a ticket still unused, and nothing else would serve it then.
    serve_line();
}

// Only connections holding a complete request join the line, so a ticket is
// used as soon as its holder runs (or returned if it closes): room is never
// parked with a connection that has nothing to send. One ticket at a time:
// a request's bytes are known only once it is taken, so the next ticket
// waits for them (take_bytes) or for the next reply (give); otherwise a
// burst of tickets could overrun the byte budget by many requests.
void InflightBudget::serve_line() {
    while (!waiters_.empty() && tickets_ == 0 && has_room()) {
        auto head = waiters_.front().lock();
        waiters_.pop_front();
        if (!head) continue;
        ++tickets_;
        head->budget_available();
    }
}

InflightBudget::Stats InflightBudget::stats() const {
    return {requests_, bytes_, peak_requests_, peak_bytes_, waits_, tickets_};
}

}   // namespace nbdsched::daemon
