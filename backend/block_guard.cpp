#include "backend/block_guard.hpp"

#include <iterator>

namespace nbdsched::backend {

namespace {

bool overlap(std::uint64_t a_start, std::uint64_t a_end, std::uint64_t b_start, std::uint64_t b_end) {
    return a_start < b_end && b_start < a_end;
}

}   // namespace

BlockGuard::Hold& BlockGuard::Hold::operator=(Hold&& other) noexcept {
    if (this != &other) {
        release();
        guard_ = other.guard_;
        counted_ = other.counted_;
        entry_ = other.entry_;
        other.guard_ = nullptr;
    }
    return *this;
}

void BlockGuard::Hold::release() {
    if (guard_) guard_->release(*this);
    guard_ = nullptr;
}

// An exclusive entry waits for the entries before it that overlap it; a
// shared one (not yet in the list: until = end) for every exclusive one that
// overlaps it, waiting ones included, so a stream of writes cannot starve a
// read-modify-write.
bool BlockGuard::conflicts(const Entry& e, std::list<Entry>::const_iterator until) const {
    for (auto it = entries_.cbegin(); it != until; ++it)
        if ((e.exclusive || it->exclusive) && overlap(e.start, e.end, it->start, it->end)) return true;
    return false;
}

std::optional<BlockGuard::Hold> BlockGuard::try_counted() {
    counted_.fetch_add(1);
    if (exclusive_.load() == 0) {
        Hold h;
        h.guard_ = this;
        h.counted_ = true;
        return h;
    }
    counted_.fetch_sub(1);   // the caller registers instead, and wakes a read-modify-write waiting for this count
    return std::nullopt;
}

BlockGuard::Hold BlockGuard::registered(std::uint64_t start, std::uint64_t end, bool exclusive) {
    entries_.push_back({start, end, exclusive});
    Hold h;
    h.guard_ = this;
    h.entry_ = std::prev(entries_.end());
    return h;
}

BlockGuard::Hold BlockGuard::shared(std::uint64_t start, std::uint64_t end) {
    if (auto h = try_counted()) return std::move(*h);
    std::unique_lock lock(mutex_);
    changed_.notify_all();
    const Entry e{start, end, false};
    changed_.wait(lock, [&] { return !conflicts(e, entries_.cend()); });
    return registered(start, end, false);
}

std::optional<BlockGuard::Hold> BlockGuard::try_shared(std::uint64_t start, std::uint64_t end) {
    if (auto h = try_counted()) return h;
    std::lock_guard lock(mutex_);
    changed_.notify_all();
    if (conflicts({start, end, false}, entries_.cend())) {
        wake_wanted_ = true;
        return std::nullopt;
    }
    return registered(start, end, false);
}

BlockGuard::Hold BlockGuard::exclusive(std::uint64_t start, std::uint64_t end) {
    std::unique_lock lock(mutex_);
    exclusive_.fetch_add(1);   // from here on, shared holders register (or see it and back out)
    Hold h = registered(start, end, true);
    changed_.wait(lock, [&] { return counted_.load() == 0 && !conflicts(*h.entry_, h.entry_); });
    return h;
}

void BlockGuard::set_waker(std::function<void()> waker) {
    std::lock_guard lock(mutex_);
    waker_ = std::move(waker);
}

void BlockGuard::release(Hold& h) {
    if (h.counted_) {
        counted_.fetch_sub(1);
        if (exclusive_.load() != 0) {   // a read-modify-write may wait for the count to drain
            std::lock_guard lock(mutex_);
            changed_.notify_all();
        }
        return;
    }
    std::lock_guard lock(mutex_);
    const bool exclusive = h.entry_->exclusive;
    entries_.erase(h.entry_);
    changed_.notify_all();
    if (!exclusive) return;
    exclusive_.fetch_sub(1);
    if (wake_wanted_ && waker_) {
        wake_wanted_ = false;
        waker_();
    }
}

}   // namespace nbdsched::backend
