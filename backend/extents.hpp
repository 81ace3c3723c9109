// Allocation map of a byte range, as NBD_CMD_BLOCK_STATUS (base:allocation)
// reports it: runs of data and of holes (unallocated, reading as zeros), in
// order from the start of the range.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace nbdsched::backend {

struct Extent {
    std::uint64_t length = 0;
    bool hole = false;   // unallocated: reads as zeros
};

// Collects extents, merging a run with the one before it when both are of
// the same kind, up to `max` entries (a client asks again for the rest).
class ExtentList {
public:
    explicit ExtentList(std::size_t max) : max_(max) {}
    // False when the list is full and the run could not be merged: stop.
    bool add(std::uint64_t length, bool hole) {
        if (length == 0) return true;
        if (!items_.empty() && items_.back().hole == hole) {
            items_.back().length += length;
            return true;
        }
        if (items_.size() >= max_) return false;
        items_.push_back({length, hole});
        return true;
    }
    const std::vector<Extent>& items() const { return items_; }

private:
    std::size_t max_;
    std::vector<Extent> items_;
};

}   // namespace nbdsched::backend
