#include "daemon/device/async_completions.hpp"

#include <boost/asio/post.hpp>

namespace nbdsched::daemon {

AsyncCompletions::AsyncCompletions(boost::asio::io_context& io, Deliver deliver)
    : io_(io), deliver_(std::move(deliver)) {}

AsyncCompletions::~AsyncCompletions() {
    std::lock_guard lock(shared_->mutex);
    shared_->alive = false;
}

void AsyncCompletions::completed(void* tag, int error) {
    {
        std::lock_guard lock(shared_->mutex);
        shared_->ready.emplace_back(static_cast<IoRequest*>(tag), error);
        if (shared_->posted || !shared_->alive) return;
        shared_->posted = true;
    }
    // The handler holds the shared state, not `this`: it may run after the
    // device is gone (shutdown), and then does nothing.
    boost::asio::post(io_, in_slot(*drain_slot_, [this, shared = shared_] {
                          {
                              std::lock_guard lock(shared->mutex);
                              if (!shared->alive) return;
                          }
                          drain();
                      }));
}

void AsyncCompletions::completed_on_loop(void* tag, int error) {
    ++delivered_;
    deliver_(*static_cast<IoRequest*>(tag), error);
}

void AsyncCompletions::drain() {
    ++wakeups_;
    {
        std::lock_guard lock(shared_->mutex);
        batch_.swap(shared_->ready);
        shared_->posted = false;
    }
    delivered_ += batch_.size();
    for (auto& [request, error] : batch_) deliver_(*request, error);
    batch_.clear();
}

}   // namespace nbdsched::daemon
