#include "readahead/cache.hpp"

#include <cstring>
#include <utility>

namespace nbdsched::readahead {

ExtentCache::Map::iterator ExtentCache::first_ending_after(std::uint64_t offset) {
    const auto it = std::as_const(*this).first_ending_after(offset);
    return map_.erase(it, it);   // const_iterator -> iterator, erases nothing
}

ExtentCache::Map::const_iterator ExtentCache::first_ending_after(std::uint64_t offset) const {
    auto it = map_.upper_bound(offset);
    if (it != map_.begin()) {
        auto prev = std::prev(it);
        if (prev->second.end(prev->first) > offset)
            return prev;
    }
    return it;
}

bool ExtentCache::contains(std::uint64_t offset, std::uint64_t length) const {
    const std::uint64_t end = offset + length;
    std::uint64_t pos = offset;
    for (auto it = first_ending_after(offset); pos < end; ++it) {
        if (it == map_.end() || it->first > pos)
            return false;   // a gap
        pos = it->second.end(it->first);
    }
    return true;
}

std::optional<Range> ExtentCache::extent_from(std::uint64_t offset) const {
    const auto it = first_ending_after(offset);
    if (it == map_.end())
        return std::nullopt;
    return Range{it->first, it->second.data.size()};
}

bool ExtentCache::lookup(std::uint64_t offset, std::span<std::byte> out) {
    if (out.empty() || !contains(offset, out.size()))
        return false;
    const std::uint64_t end = offset + out.size();
    std::uint64_t pos = offset;
    for (auto it = first_ending_after(offset); pos < end; ++it) {
        const std::uint64_t extent_end = it->second.end(it->first);
        const std::uint64_t n = std::min(end, extent_end) - pos;
        std::memcpy(out.data() + (pos - offset), it->second.data.data() + (pos - it->first), n);
        pos += n;
        // Read to its end: consumed, evict first. Otherwise still in use.
        it->second.consumed = it->second.consumed || pos == extent_end;
        lru_.splice(pos == extent_end ? lru_.begin() : lru_.end(), lru_, it->second.lru);
    }
    return true;
}

ExtentCache::Map::iterator ExtentCache::erase(Map::iterator it) {
    bytes_ -= it->second.data.size();
    memory_ -= charge(it->second.data.capacity());
    lru_.erase(it->second.lru);
    return map_.erase(it);
}

std::uint64_t ExtentCache::invalidate(std::uint64_t offset, std::uint64_t length) {
    std::uint64_t dropped = 0;
    const std::uint64_t end = offset + length;
    for (auto it = first_ending_after(offset); it != map_.end() && it->first < end;) {
        dropped += it->second.data.size();
        it = erase(it);
    }
    return dropped;
}

bool ExtentCache::make_room(std::uint64_t extra, bool consumed_only) {
    if (extra > limit_)
        return false;
    while (memory_ + extra > limit_ && !lru_.empty()) {
        const std::uint64_t victim = lru_.front();
        auto it = map_.find(victim);
        if (consumed_only && !it->second.consumed)
            return false;   // consumed extents sit at the front: none left
        evicted_ += it->second.data.size();
        erase(it);
    }
    return memory_ + extra <= limit_;
}

bool ExtentCache::insert(std::uint64_t offset, ExtentBytes&& data, std::uint64_t reserved) {
    if (data.size() == 0)
        return false;
    invalidate(offset, data.size());
    const std::uint64_t held = charge(data.capacity());
    if (!make_room(held + reserved))
        return false;
    const std::uint64_t n = data.size();
    auto [it, inserted] = map_.emplace(offset, Entry{std::move(data), {}});
    it->second.lru = lru_.insert(lru_.end(), offset);
    bytes_ += n;
    memory_ += held;
    return inserted;
}

void ExtentCache::clear() {
    map_.clear();
    lru_.clear();
    bytes_ = 0;
    memory_ = 0;
}

}   // namespace nbdsched::readahead
