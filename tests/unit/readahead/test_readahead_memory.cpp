// What read-ahead memory holds: each piece is charged its buffer as
// allocated plus bookkeeping, and pieces under a page are never made, so a
// client cannot fill the cache with tiny extents each holding a whole block;
// and what it holds across a change of the device's size.
#include <doctest/doctest.h>

#include <bit>

#include "backend/ram_backend.hpp"
#include "readahead/readahead.hpp"
#include "pattern.hpp"

using nbdsched::backend::RamBackend;
using namespace nbdsched::readahead;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

// Like the daemon's buffer pool: powers of two from 4 KiB up to 1 MiB,
// whole pages above.
std::uint64_t pool_block(std::uint64_t n) {
    return n > MiB ? (n + 4095) / 4096 * 4096 : std::bit_ceil(std::max<std::uint64_t>(n, 4096));
}

// The prefetch's data in a buffer of the size the pool would give it.
std::vector<std::byte> fetch(RamBackend& disk, const Prefetch& p) {
    std::vector<std::byte> buf;
    buf.reserve(pool_block(p.length));
    buf.resize(p.length);
    REQUIRE(disk.read(p.offset, buf) == 0);
    return buf;
}

Options opts(std::uint64_t window, std::uint64_t cache, std::uint64_t max_io) {
    return {.device_size = 256 * MiB,
            .window_bytes = window,
            .cache_bytes = cache,
            .max_io_bytes = max_io,
            .buffer_bytes = pool_block};
}

}   // namespace

TEST_CASE("read-ahead memory: a read overlapping cached data by less than a page is a miss, not a fill") {
    RamBackend disk(256 * MiB);
    ReadAhead ra(opts(128 * KiB, 64 * MiB, 1280 * KiB));
    std::vector<std::byte> page(4 * KiB);
    ra.on_read(1, 0, page);
    auto d = ra.on_read(1, 4 * KiB, page);   // a stream: [8 KiB, 24 KiB) prefetched
    for (const auto& p : d.prefetch)
        ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
    // Each 1 KiB read starts 512 bytes before the previous one's end: half
    // cached. Filling the other half cached 512-byte extents, each holding
    // a 4 KiB block and its nodes (8x its bytes in the daemon).
    std::vector<std::byte> small(1 * KiB);
    std::uint64_t pos = 24 * KiB;
    for (int i = 0; i < 2000; ++i, pos += 512) {
        auto r = ra.on_read(2, pos - 512, small);
        for (const auto& p : r.prefetch) {
            CHECK(p.length >= min_piece_bytes);
            ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
        }
    }
    const Stats s = ra.stats();
    CHECK(s.fills == 0);
    CHECK(s.bytes_filled == 0);
}

TEST_CASE("read-ahead memory: prefetches are never split below a page, whatever max_io says") {
    RamBackend disk(256 * MiB);
    ReadAhead ra(opts(16 * MiB, 64 * MiB, 512));
    std::vector<std::byte> buf(1 * MiB);
    std::uint64_t pieces = 0;
    for (std::uint64_t off = 0; off < 64 * MiB; off += buf.size()) {
        auto d = ra.on_read(1, off, buf);
        for (const auto& p : d.prefetch) {
            CHECK(p.length >= min_piece_bytes);
            ++pieces;
            ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
        }
        if (d.kind == ReadDecision::Kind::wait)
            REQUIRE(ra.lookup(off, buf));
    }
    CHECK(pieces > 0);
}

TEST_CASE("read-ahead memory: buffers as allocated and bookkeeping count against the cache size") {
    RamBackend disk(256 * MiB);
    const std::uint64_t limit = 8 * MiB;
    // 96 KiB pieces in 128 KiB blocks: counting data bytes alone let the
    // blocks hold a third more than the limit.
    ReadAhead ra(opts(4 * MiB, limit, 96 * KiB));
    std::vector<std::byte> buf(256 * KiB);
    std::uint64_t held = 0, extents = 0;
    std::vector<Prefetch> pending;
    for (std::uint64_t off = 0; off < 128 * MiB; off += buf.size()) {
        auto d = ra.on_read(1, off, buf);
        pending.insert(pending.end(), d.prefetch.begin(), d.prefetch.end());
        const Stats s = ra.stats();
        REQUIRE(s.memory_bytes <= limit);
        if (off % (1 * MiB) == 0) {   // prefetches land late, in batches
            for (const auto& p : pending)
                ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
            pending.clear();
        }
    }
    for (const auto& p : pending)
        ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
    const Stats s = ra.stats();
    extents = s.bytes_cached / (96 * KiB);
    held = extents * (pool_block(96 * KiB) + extent_overhead_bytes);
    CHECK(held <= limit);
    CHECK(s.memory_bytes <= limit);
    CHECK(s.memory_bytes >= held);
    CHECK(s.hits > 0);
}

TEST_CASE("read-ahead resize: nothing read before a size change is served after it; windows follow the new end") {
    RamBackend disk(256 * MiB);
    ReadAhead ra(opts(1 * MiB, 64 * MiB, 1280 * KiB));
    std::vector<std::byte> buf(128 * KiB);
    std::vector<Prefetch> late;
    for (std::uint64_t off = 0; off < 4 * MiB; off += buf.size()) {
        auto d = ra.on_read(1, off, buf);
        for (const auto& p : d.prefetch)
            if (p.offset < 3 * MiB)
                ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
            else
                late.push_back(p);   // still in flight at the size change
    }
    REQUIRE(ra.lookup(2 * MiB, buf));
    ra.resize(512 * MiB);
    CHECK(ra.stats().bytes_cached == 0);
    CHECK_FALSE(ra.lookup(2 * MiB, buf));
    for (const auto& p : late)
        ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
    CHECK(ra.stats().bytes_cached == 0);   // read before the change: dropped
    // Past the old end (256 MiB): a stream is read ahead now.
    std::uint64_t prefetched = 0;
    for (std::uint64_t off = 300 * MiB; off < 302 * MiB; off += buf.size())
        for (const auto& p : ra.on_read(1, off, buf).prefetch)
            prefetched += p.length;
    CHECK(prefetched > 0);
}

TEST_CASE("read-ahead memory: a window as large as the cache is cut, so one window never evicts the last") {
    RamBackend disk(256 * MiB);
    ReadAhead ra(opts(128 * MiB, 64 * MiB, 1280 * KiB));
    CHECK(ra.stats().window_bytes == 32 * MiB - 640 * KiB);   // half of what one 1280 KiB piece leaves
    std::vector<std::byte> buf(1 * MiB);
    std::vector<Prefetch> pending;
    for (std::uint64_t off = 0; off < 256 * MiB; off += buf.size()) {
        auto d = ra.on_read(1, off, buf);
        pending.insert(pending.end(), d.prefetch.begin(), d.prefetch.end());
        if (d.kind != ReadDecision::Kind::hit) {   // the reader waits: what is out lands
            for (const auto& p : pending)
                ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
            pending.clear();
        }
    }
    const Stats s = ra.stats();
    MESSAGE("prefetched " << (s.bytes_prefetched >> 20) << " MiB, evicted " << (s.bytes_evicted >> 20) << " MiB");
    CHECK(s.bytes_prefetched <= 256 * MiB + 64 * MiB);
    CHECK(s.misses <= 4);
}
