#include "sched/seek_history.hpp"

namespace nbdsched::sched {

[[gnu::hot]] void SeekHistory::add(bool sought) {
    set_ = set_ - (bits_ >> 31) + (sought ? 1u : 0u);
    bits_ = (bits_ << 1) | (sought ? 1u : 0u);
    if (samples_ < 32) ++samples_;
}

[[gnu::hot]] bool SeekHistory::seeky(unsigned threshold) const { return set_ > threshold; }

bool SeekHistory::seeky_so_far(unsigned threshold) const {
    if (seeky(threshold)) return true;
    // From the second request (the first cannot seek: nothing to measure
    // from) until the history is full; a random queue's 21st request is its
    // first with more than 19 of 32 bits set.
    return samples_ >= 2 && samples_ < 32 && set_ + 1 >= samples_;
}

}   // namespace nbdsched::sched
