// A byte range of the device, shared by the read-ahead parts (streams,
// cache, in-flight bookkeeping).
#pragma once

#include <cstdint>

namespace nbdsched::readahead {

struct Range {
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::uint64_t end() const { return offset + length; }
    bool overlaps(std::uint64_t o, std::uint64_t l) const { return o < end() && offset < o + l; }
    bool contains(std::uint64_t pos) const { return offset <= pos && pos < end(); }
    bool operator==(const Range&) const = default;
};

}   // namespace nbdsched::readahead
