#include <doctest/doctest.h>

#include "backend/ram_backend.hpp"
#include "readahead/readahead.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::readahead;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

// Runs a prefetch against `disk` now and returns its data.
std::vector<std::byte> fetch(RamBackend& disk, const Prefetch& p) {
    std::vector<std::byte> buf(p.length);
    REQUIRE(disk.read(p.offset, buf) == 0);
    return buf;
}

Options opts(std::uint64_t size, std::uint64_t window, std::uint64_t cache) {
    Options o;
    o.device_size = size;
    o.window_bytes = window;
    o.cache_bytes = cache;
    return o;
}

}   // namespace

TEST_CASE("read-ahead: a sequential reader is served from the cache") {
    RamBackend disk(32 * MiB);
    REQUIRE(disk.write(0, byte_pattern(0, 32 * MiB), false) == 0);
    ReadAhead ra(opts(32 * MiB, 2560 * KiB, 64 * MiB));
    std::vector<std::byte> buf(128 * KiB);
    int waits = 0;
    for (std::uint64_t off = 0; off < 32 * MiB; off += buf.size()) {
        auto d = ra.on_read(1, off, buf);
        for (const auto& p : d.prefetch)   // the "daemon" completes prefetches at once
            ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
        if (d.kind == ReadDecision::Kind::wait) {
            ++waits;
            REQUIRE(ra.lookup(off, buf));
        } else if (d.kind == ReadDecision::Kind::miss) {
            REQUIRE(disk.read(off, buf) == 0);
        }
        REQUIRE(is_pattern(buf, off));
    }
    const Stats s = ra.stats();
    MESSAGE("hits " << s.hits << " misses " << s.misses << " prefetched " << s.bytes_prefetched);
    CHECK(s.misses == 2);   // the two reads that detect the stream
    CHECK(s.hits == 32 * MiB / buf.size() - 2);
    CHECK(s.window_bytes == 2560 * KiB);
    CHECK(s.bytes_cached <= 64 * MiB);
    CHECK(s.bytes_inflight == 0);
}

TEST_CASE("read-ahead: write then read returns the new data") {
    RamBackend disk(8 * MiB);
    REQUIRE(disk.write(0, byte_pattern(0, 8 * MiB, 1), false) == 0);
    ReadAhead ra(opts(8 * MiB, 512 * KiB, 8 * MiB));
    std::vector<std::byte> buf(64 * KiB);
    for (std::uint64_t off = 0; off < 3 * 64 * KiB; off += buf.size())
        for (const auto& p : ra.on_read(1, off, buf).prefetch)
            ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
    REQUIRE(ra.lookup(4 * 64 * KiB, buf));   // cached ahead
    const std::uint64_t w = 4 * 64 * KiB + 1000;
    ra.on_write(w, 10);
    REQUIRE(disk.write(w, byte_pattern(w, 10, 2), false) == 0);
    ra.on_write_done(w, 10);
    CHECK(ra.lookup(384 * KiB, buf));   // the next extent was not touched
    auto d2 = ra.on_read(1, 4 * 64 * KiB, buf);
    REQUIRE(d2.kind == ReadDecision::Kind::miss);
    REQUIRE(disk.read(4 * 64 * KiB, buf) == 0);
    CHECK(is_pattern({buf.begin() + 1000, buf.begin() + 1010}, w, 2));
    CHECK(ra.stats().bytes_invalidated > 0);
}

TEST_CASE("read-ahead: a window skipped for a pending write is asked for again without shrinking") {
    // The stream's second read asks for 256 KiB at 128 KiB, but a write is
    // pending there, so nothing is fetched. The next read misses in that
    // range: not thrashing (nothing was evicted), so the window keeps
    // growing and the fourth read already asks for the full 512 KiB.
    RamBackend disk(8 * MiB);
    ReadAhead ra(opts(8 * MiB, 512 * KiB, 8 * MiB));
    std::vector<std::byte> buf(64 * KiB);
    auto read_and_fetch = [&](std::uint64_t off) {
        auto d = ra.on_read(1, off, buf);
        for (const auto& p : d.prefetch)
            ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
        return d;
    };
    read_and_fetch(0);
    ra.on_write(200 * KiB, 4 * KiB);
    CHECK(read_and_fetch(64 * KiB).prefetch.empty());
    ra.on_write_done(200 * KiB, 4 * KiB);
    auto third = read_and_fetch(128 * KiB);
    CHECK(third.kind == ReadDecision::Kind::miss);
    REQUIRE(third.prefetch.size() == 1);
    CHECK(third.prefetch[0].offset == 192 * KiB);
    CHECK(third.prefetch[0].length == 256 * KiB);
    auto fourth = read_and_fetch(192 * KiB);
    CHECK(fourth.kind == ReadDecision::Kind::hit);
    REQUIRE(fourth.prefetch.size() == 1);
    CHECK(fourth.prefetch[0].offset == 448 * KiB);
    CHECK(fourth.prefetch[0].length == 512 * KiB);
}

TEST_CASE("read-ahead: a write landing while a prefetch is in flight drops the prefetch") {
    RamBackend disk(8 * MiB);
    REQUIRE(disk.write(0, byte_pattern(0, 8 * MiB, 1), false) == 0);
    std::vector<std::byte> buf(64 * KiB);

    SUBCASE("prefetch read before the write, completed after it") {
        ReadAhead ra(opts(8 * MiB, 512 * KiB, 8 * MiB));
        ra.on_read(1, 0, buf);
        auto d = ra.on_read(1, 64 * KiB, buf);
        REQUIRE(!d.prefetch.empty());
        const Prefetch p = d.prefetch.front();
        auto old_data = fetch(disk, p);   // the backend read happens first
        ra.on_write(p.offset + 5, 1);
        REQUIRE(disk.write(p.offset + 5, byte_pattern(p.offset + 5, 1, 2), false) == 0);
        ra.on_write_done(p.offset + 5, 1);
        ra.on_prefetch_done(p.ticket, 0, std::move(old_data));
        CHECK(ra.stats().prefetches_dropped == 1);
        CHECK_FALSE(ra.lookup(p.offset, std::span(buf).first(64)));
    }
    SUBCASE("prefetch issued after the write arrived, read before it reached the disk") {
        ReadAhead ra(opts(8 * MiB, 512 * KiB, 8 * MiB));
        ra.on_read(1, 0, buf);
        const std::uint64_t w = 64 * KiB + 200 * KiB;   // inside the window the next read asks for
        ra.on_write(w, 4096);
        auto d = ra.on_read(1, 64 * KiB, buf);
        // Either nothing is prefetched over the pending write, or what is
        // prefetched is dropped; never cached stale.
        for (const auto& p : d.prefetch) {
            auto old_data = fetch(disk, p);
            REQUIRE(disk.write(w, byte_pattern(w, 4096, 2), false) == 0);
            ra.on_write_done(w, 4096);
            ra.on_prefetch_done(p.ticket, 0, std::move(old_data));
        }
        if (d.prefetch.empty()) {
            REQUIRE(disk.write(w, byte_pattern(w, 4096, 2), false) == 0);
            ra.on_write_done(w, 4096);
        }
        std::vector<std::byte> at(4096);
        if (ra.lookup(w, at))
            CHECK(is_pattern(at, w, 2));
        CHECK(ra.stats().bytes_cached == 0);
    }
    SUBCASE("a failed or short prefetch is dropped; parked readers fall back") {
        ReadAhead ra(opts(8 * MiB, 512 * KiB, 8 * MiB));
        ra.on_read(1, 0, buf);
        auto d = ra.on_read(1, 64 * KiB, buf);
        REQUIRE(d.prefetch.size() == 1);
        auto parked = ra.on_read(1, 128 * KiB, buf);
        REQUIRE(parked.kind == ReadDecision::Kind::wait);
        CHECK(parked.wait_ticket == d.prefetch[0].ticket);
        ra.on_prefetch_done(d.prefetch[0].ticket, 5, {});
        CHECK_FALSE(ra.lookup(128 * KiB, buf));
        CHECK(ra.stats().prefetches_dropped == 1);
        std::uint64_t still = 0;   // the parked read's own read-ahead is still out
        for (const auto& p : parked.prefetch)
            still += p.length;
        CHECK(ra.stats().bytes_inflight == still);
        ra.on_prefetch_done(12345, 0, {});   // unknown ticket: ignored
    }
}

TEST_CASE("read-ahead: memory bound holds with many streams, including data in flight") {
    RamBackend disk(256 * MiB);
    const std::uint64_t limit = 4 * MiB;
    ReadAhead ra(opts(256 * MiB, 2560 * KiB, limit));
    std::vector<std::byte> buf(128 * KiB);
    std::vector<Prefetch> pending;
    for (std::uint64_t i = 0; i < 200; ++i)
        for (std::uint64_t q = 0; q < 8; ++q) {
            const std::uint64_t off = q * 32 * MiB + i * buf.size();
            auto d = ra.on_read(q, off, buf);
            pending.insert(pending.end(), d.prefetch.begin(), d.prefetch.end());
            const Stats s = ra.stats();
            REQUIRE(s.bytes_cached + s.bytes_inflight <= limit);
            if (i % 3 == 2) {   // complete in batches, late
                for (const auto& p : pending)
                    ra.on_prefetch_done(p.ticket, 0, fetch(disk, p));
                pending.clear();
            }
        }
    const Stats s = ra.stats();
    CHECK(s.bytes_cached + s.bytes_inflight <= limit);
    CHECK(s.prefetches > 0);
    CHECK(s.hits > 400);   // thrashing shrinks windows instead of evicting everything (66 without)
    MESSAGE("skipped " << s.prefetches_skipped << " evicted " << s.bytes_evicted << " hits " << s.hits);
}

TEST_CASE("read-ahead: off (window 0) is a pass-through") {
    ReadAhead ra(opts(8 * MiB, 0, 8 * MiB));
    std::vector<std::byte> buf(4096);
    for (std::uint64_t off = 0; off < 1 * MiB; off += 4096) {
        auto d = ra.on_read(1, off, buf);
        CHECK(d.kind == ReadDecision::Kind::miss);
        CHECK(d.prefetch.empty());
    }
    ra.on_write(0, 4096);
    ra.on_write_done(0, 4096);
    CHECK_FALSE(ra.enabled());
    CHECK(ra.stats().prefetches == 0);
}
