#include <doctest/doctest.h>

#include "readahead/cache.hpp"
#include "pattern.hpp"

using namespace nbdsched::readahead;
using namespace nbdsched::testlib;

TEST_CASE("cache: lookup serves only wholly cached ranges, across adjacent extents") {
    ExtentCache c(1 << 20);
    REQUIRE(c.insert(4096, byte_pattern(4096, 4096)));
    REQUIRE(c.insert(8192, byte_pattern(8192, 4096)));
    REQUIRE(c.insert(20000, byte_pattern(20000, 100)));
    std::vector<std::byte> out(6000);
    CHECK(c.lookup(5000, out));   // spans the two adjacent extents
    CHECK(is_pattern(out, 5000));
    std::vector<std::byte> miss(6000, std::byte{7});
    CHECK_FALSE(c.lookup(8192, miss));   // 12288..14192 missing
    CHECK(miss[0] == std::byte{7});      // untouched on a miss
    CHECK_FALSE(c.lookup(0, std::span(miss).first(100)));
    CHECK(c.contains(20000, 100));
    CHECK_FALSE(c.contains(19999, 2));
    CHECK(c.bytes() == 8292);
}

TEST_CASE("cache: invalidate drops every overlapping extent") {
    ExtentCache c(1 << 20);
    for (std::uint64_t i = 0; i < 8; ++i)
        REQUIRE(c.insert(i * 4096, byte_pattern(i * 4096, 4096)));
    CHECK(c.invalidate(4095, 2) == 8192);   // touches extents 0 and 1
    CHECK(c.invalidate(100000, 5) == 0);
    CHECK(c.invalidate(4 * 4096, 1) == 4096);
    CHECK(c.extents() == 5);
    CHECK(c.bytes() == 5 * 4096);
    std::vector<std::byte> out(10);
    CHECK_FALSE(c.lookup(4096, out));
    CHECK(c.lookup(2 * 4096, out));
}

TEST_CASE("cache: the byte limit holds; consumed extents go first, then LRU") {
    ExtentCache c(4 * 4096);
    for (std::uint64_t i = 0; i < 4; ++i)
        REQUIRE(c.insert(i * 4096, byte_pattern(i * 4096, 4096)));
    std::vector<std::byte> page(4096);
    CHECK(c.lookup(3 * 4096, page));   // extent 3 fully read: consumed, coldest
    std::vector<std::byte> part(100);
    CHECK(c.lookup(0, part));   // extent 0 partly read: hot
    REQUIRE(c.insert(10 * 4096, byte_pattern(10 * 4096, 4096)));
    CHECK(c.bytes() <= c.limit());
    CHECK_FALSE(c.contains(3 * 4096, 4096));   // the consumed one went
    REQUIRE(c.insert(11 * 4096, byte_pattern(11 * 4096, 4096)));
    CHECK_FALSE(c.contains(1 * 4096, 4096));   // then the least recently used
    CHECK(c.contains(0, 4096));
    CHECK(c.evicted_bytes() == 2 * 4096);
    CHECK_FALSE(c.insert(100 * 4096, byte_pattern(0, 5 * 4096)));         // larger than the limit
    CHECK_FALSE(c.insert(100 * 4096, byte_pattern(0, 4096), 4 * 4096));   // no room beside the reserve
    CHECK(c.bytes() <= c.limit());
}

TEST_CASE("cache: an insert replaces overlapping extents") {
    ExtentCache c(1 << 20);
    REQUIRE(c.insert(0, byte_pattern(0, 8192, 1)));
    REQUIRE(c.insert(4096, byte_pattern(4096, 8192, 2)));
    CHECK(c.bytes() == 8192);
    std::vector<std::byte> out(8192);
    CHECK(c.lookup(4096, out));
    CHECK(is_pattern(out, 4096, 2));
    CHECK_FALSE(c.contains(0, 1));
}

TEST_CASE("cache: extent_from finds the extent holding an offset or the next; consumed-only eviction") {
    ExtentCache c(3 * 4096);
    REQUIRE(c.insert(0, byte_pattern(0, 4096)));
    REQUIRE(c.insert(8192, byte_pattern(8192, 4096)));
    CHECK(c.extent_from(100) == Range{0, 4096});
    CHECK(c.extent_from(4096) == Range{8192, 4096});   // in the gap: the next one
    CHECK_FALSE(c.extent_from(12288).has_value());
    // Nothing read yet: room for two more pages only by evicting unread data.
    CHECK_FALSE(c.make_room(2 * 4096, true));
    CHECK(c.bytes() == 2 * 4096);
    std::vector<std::byte> out(4096);
    REQUIRE(c.lookup(0, out));   // read to its end: consumed
    CHECK(c.make_room(2 * 4096, true));
    CHECK(c.extent_from(0) == Range{8192, 4096});   // the unread extent stayed
}

TEST_CASE("cache: the limit counts each extent's buffer capacity and its bookkeeping, not its data bytes") {
    ExtentCache c(10 * 4096, 512);
    for (std::uint64_t i = 0; i < 20; ++i) {
        std::vector<std::byte> small = byte_pattern(i * 4096, 512);
        small.reserve(4096);   // a 512-byte extent in a 4 KiB block
        REQUIRE(c.insert(i * 4096, std::move(small)));
        CHECK(c.memory() <= c.limit());
    }
    CHECK(c.extents() == 10 * 4096 / (4096 + 512));
    CHECK(c.bytes() == c.extents() * 512);
    CHECK(c.memory() == c.extents() * (4096 + 512));
}

namespace {
// What went back through ExtentBytes' release: blocks and their bytes.
int released = 0;
std::size_t released_bytes = 0;
void count_release(std::byte* block, std::size_t capacity) {
    ++released;
    released_bytes += capacity;
    delete[] block;
}
ExtentBytes block_of(std::size_t size) {
    return ExtentBytes(new std::byte[size], size, size, count_release);
}
}   // namespace

// The daemon's prefetch buffers go back to its buffer pool this way, for the
// next prefetch: a block must come back exactly once, whenever its extent goes.
TEST_CASE("cache: an extent's block goes back through its release once, whichever way the extent goes") {
    released = 0;
    released_bytes = 0;
    {
        ExtentCache c(4 * (4096 + 4096), 4096);   // room for four 4 KiB extents
        for (std::uint64_t i = 0; i < 4; ++i)
            REQUIRE(c.insert(i * 4096, block_of(4096)));
        CHECK(released == 0);
        REQUIRE(c.insert(10 * 4096, block_of(4096)));   // evicts extent 0
        CHECK(released == 1);
        REQUIRE(c.insert(10 * 4096, block_of(4096)));   // replaces itself
        CHECK(released == 2);
        CHECK(c.invalidate(4096, 1) == 4096);
        CHECK(released == 3);
        CHECK_FALSE(c.insert(20 * 4096, block_of(8 * 4096)));   // never fits: the caller's, released as it goes
        CHECK(released == 4);
        ExtentBytes moved = block_of(4096);
        ExtentBytes target = std::move(moved);   // one owner at a time
        target = block_of(8192);                 // the old block goes
        CHECK(released == 5);
        REQUIRE(c.insert(30 * 4096, std::move(target)));   // evicts extent 2
        CHECK(released == 6);
        CHECK(c.extents() == 3);
        c.clear();
        CHECK(released == 9);
        REQUIRE(c.insert(0, block_of(4096)));
    }
    CHECK(released == 10);   // the cache's own end releases what it holds
    CHECK(released_bytes == 8 * 4096 + 8 * 4096 + 8192);
}
