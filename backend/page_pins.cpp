#include "backend/page_pins.hpp"

#include <algorithm>
#include <limits>

namespace nbdsched::backend {

PagePins::Pin PagePins::pin() {
    std::lock_guard lock(mutex_);
    if (live_.empty() || live_.back().epoch != epoch_)
        live_.push_back({epoch_, 0});
    ++live_.back().count;
    return epoch_;
}

void PagePins::unpin(Pin pin) {
    std::lock_guard lock(mutex_);
    auto it = std::find_if(live_.begin(), live_.end(), [pin](const EpochPins& e) { return e.epoch == pin; });
    if (it == live_.end())
        return;   // not ours: nothing to end
    if (--it->count == 0)
        live_.erase(it);
    const std::uint64_t oldest = live_.empty() ? std::numeric_limits<std::uint64_t>::max() : live_.front().epoch;
    while (!retired_.empty() && retired_.front().epoch < oldest) {
        arena_.give(retired_.front().page);
        retired_.pop_front();
    }
}

// Tagged with the newest epoch that has pins out; a pin that begins later
// gets a newer epoch, so that it does not hold this page.
void PagePins::free_page(std::byte* page) {
    {
        std::lock_guard lock(mutex_);
        if (!live_.empty()) {
            const std::uint64_t newest = live_.back().epoch;
            retired_.push_back({newest, page});
            if (epoch_ == newest)
                ++epoch_;
            return;
        }
    }
    arena_.give(page);
}

std::size_t PagePins::retired() const {
    std::lock_guard lock(mutex_);
    return retired_.size();
}

}   // namespace nbdsched::backend
