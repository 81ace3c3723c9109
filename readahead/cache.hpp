// A bounded cache of prefetched extents (non-overlapping byte ranges of the
// device), evicted least-recently-used first. Not thread-safe: ReadAhead
// serialises access.
//
// Use-once ordering: an insert is hot; a hit that reads up to an extent's
// end marks it consumed and coldest (a sequential reader will not come
// back), a hit inside it keeps it hot. So unread prefetched data outlives
// data already handed to the client.
//
// The limit is on memory, not on bytes of data: each extent is charged its
// buffer's capacity (a 512-byte extent in a 4 KiB block holds 4 KiB) plus
// `per_extent_overhead` for its bookkeeping (map and LRU nodes). Those nodes
// come from a NodePool: an extent evicted leaves its nodes for the next
// insert, so a cache in steady state allocates nothing; the pool keeps at
// most what the most extents held at once took, which the limit bounds.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <map>
#include <memory_resource>
#include <optional>
#include <span>

#include "common/node_pool.hpp"
#include "readahead/extent_bytes.hpp"
#include "readahead/range.hpp"

namespace nbdsched::readahead {

class ExtentCache {
public:
    explicit ExtentCache(std::uint64_t limit_bytes, std::uint64_t per_extent_overhead = 0)
        : limit_(limit_bytes), overhead_(per_extent_overhead) {}

    // Copies [offset, offset + out.size()) into `out` when it is wholly
    // cached (possibly across adjacent extents) and returns true; otherwise
    // returns false and leaves `out` untouched.
    bool lookup(std::uint64_t offset, std::span<std::byte> out);
    // True when the whole range is cached (no LRU change).
    bool contains(std::uint64_t offset, std::uint64_t length) const;
    // The cached extent holding `offset`, or else the first one after it
    // (no LRU change). Adjacent extents are returned one at a time.
    std::optional<Range> extent_from(std::uint64_t offset) const;

    // Adds an extent, replacing any extents overlapping it, after evicting
    // enough to respect the limit with `reserved` bytes of memory set aside
    // (data in flight). Returns false, inserting nothing, when it cannot fit.
    bool insert(std::uint64_t offset, ExtentBytes&& data, std::uint64_t reserved = 0);
    // Drops every extent overlapping the range; returns the bytes dropped.
    std::uint64_t invalidate(std::uint64_t offset, std::uint64_t length);
    // Evicts LRU extents until memory() + extra <= limit(); false if even an
    // empty cache could not (extra > limit). `consumed_only`: evict only
    // extents read to their end, never data still ahead of a reader.
    bool make_room(std::uint64_t extra, bool consumed_only = false);
    void clear();

    std::uint64_t bytes() const { return bytes_; }     // data cached
    std::uint64_t memory() const { return memory_; }   // what it holds: charged against limit()
    std::uint64_t limit() const { return limit_; }
    // What an extent of `capacity` bytes of buffer is charged.
    std::uint64_t charge(std::uint64_t capacity) const { return capacity + overhead_; }
    std::size_t extents() const { return map_.size(); }
    std::uint64_t evicted_bytes() const { return evicted_; }

private:
    using Lru = std::pmr::list<std::uint64_t>;
    struct Entry {
        ExtentBytes data;
        Lru::iterator lru;       // position in lru_
        bool consumed = false;   // read up to its end
        std::uint64_t end(std::uint64_t start) const { return start + data.size(); }
    };
    using Map = std::pmr::map<std::uint64_t, Entry>;

    // The first extent that ends after `offset` (the one containing it, or
    // the next one), or end().
    Map::iterator first_ending_after(std::uint64_t offset);
    Map::const_iterator first_ending_after(std::uint64_t offset) const;
    Map::iterator erase(Map::iterator it);

    std::uint64_t limit_;
    std::uint64_t overhead_;
    std::uint64_t bytes_ = 0;
    std::uint64_t memory_ = 0;
    std::uint64_t evicted_ = 0;
    common::NodePool pool_;   // before the containers it serves: outlives them
    Map map_{&pool_};
    Lru lru_{&pool_};   // front = evicted first, back = hottest
};

}   // namespace nbdsched::readahead
