#include <doctest/doctest.h>

#include "readahead/streams.hpp"

using namespace nbdsched::readahead;

namespace {
constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;
}   // namespace

TEST_CASE("streams: the second sequential read starts read-ahead, windows grow to the maximum") {
    StreamTable t(2560 * KiB, 8, 1024 * MiB);
    CHECK_FALSE(t.on_read(1, 0, 128 * KiB, false));
    auto r = t.on_read(1, 128 * KiB, 128 * KiB, false);
    REQUIRE(r);
    CHECK(*r == Range{256 * KiB, 512 * KiB});   // 4 x the request
    // Served from read-ahead: windows follow as the reader advances.
    std::uint64_t pos = 256 * KiB, ra_end = r->end(), last = r->length;
    int windows = 1;
    for (; pos < 64 * MiB; pos += 128 * KiB)
        if (auto next = t.on_read(1, pos, 128 * KiB, true)) {
            CHECK(next->offset == ra_end);   // contiguous, no gap or overlap
            CHECK(next->length >= last);     // never shrinks
            CHECK(next->length <= 2560 * KiB);
            CHECK(ra_end - pos - 128 * KiB <= 2560 * KiB);   // async: ahead by at most a window
            ra_end = next->end();
            last = next->length;
            ++windows;
        }
    CHECK(last == 2560 * KiB);
    CHECK(ra_end > pos);   // the reader never overtook the read-ahead
    CHECK(windows > 20);
}

TEST_CASE("streams: random reads never prefetch") {
    StreamTable t(128 * KiB, 8, 1024 * MiB);
    std::uint64_t x = 7;
    int prefetches = 0;
    for (int i = 0; i < 10000; ++i) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        prefetches += t.on_read(1, (x >> 24) % (256 * 1024) * 4 * KiB, 4 * KiB, false).has_value();
    }
    CHECK(prefetches < 10);   // chance hits of an adjacent block only
}

TEST_CASE("streams: several interleaved streams per queue, queues independent") {
    StreamTable t(128 * KiB, 4, 1024 * MiB);
    int prefetches = 0;
    for (std::uint64_t i = 0; i < 64; ++i)
        for (std::uint64_t s = 0; s < 4; ++s)   // 4 streams 100 MiB apart, interleaved
            prefetches += t.on_read(1, s * 100 * MiB + i * 16 * KiB, 16 * KiB, true).has_value();
    CHECK(t.stream_count(1) == 4);
    CHECK(prefetches >= 4 * 6);   // each stream keeps prefetching
    // A fifth stream evicts the least recently used one, not more.
    t.on_read(1, 900 * MiB, 4 * KiB, false);
    CHECK(t.stream_count(1) == 4);
    // Another queue reading where queue 1 left off is a new stream for it.
    CHECK_FALSE(t.on_read(2, 64 * 16 * KiB, 16 * KiB, false));
    t.forget(1);
    CHECK(t.stream_count(1) == 0);
    CHECK(t.stream_count(2) == 1);
}

TEST_CASE("streams: a miss inside the prefetched range re-prefetches; off and end of device") {
    StreamTable t(128 * KiB, 8, 1 * MiB);
    t.on_read(1, 0, 64 * KiB, false);
    auto r = t.on_read(1, 64 * KiB, 64 * KiB, false);
    REQUIRE(r);
    // The prefetched data was dropped (a write): the next read misses.
    auto again = t.on_read(1, 128 * KiB, 64 * KiB, false);
    REQUIRE(again);
    CHECK(again->offset == 192 * KiB);
    CHECK(again->length == 64 * KiB);   // thrash: half the window
    // Clipped at the end of the device, then nothing more.
    StreamTable small(128 * KiB, 8, 200 * KiB);
    small.on_read(1, 0, 64 * KiB, false);
    auto last = small.on_read(1, 64 * KiB, 64 * KiB, false);
    REQUIRE(last);
    CHECK(last->end() == 200 * KiB);
    CHECK_FALSE(small.on_read(1, 128 * KiB, 64 * KiB, true));
    StreamTable off(0, 8, 1 * MiB);
    off.on_read(1, 0, 4096, false);
    CHECK_FALSE(off.on_read(1, 4096, 4096, false));
}

TEST_CASE("streams: a window issued only in part ends where the prefetch stopped, and does not grow") {
    StreamTable t(512 * KiB, 8, 32 * MiB);
    t.on_read(1, 0, 64 * KiB, false);
    auto r = t.on_read(1, 64 * KiB, 64 * KiB, false);
    REQUIRE(r);
    CHECK(r->offset == 128 * KiB);
    CHECK(r->length == 256 * KiB);
    t.issued(1, *r, 256 * KiB);   // the cache had room for half of it
    auto next = t.on_read(1, 128 * KiB, 64 * KiB, true);
    REQUIRE(next);
    CHECK(next->offset == 256 * KiB);   // asked again from where it stopped
    CHECK(next->length == 256 * KiB);   // not 512 KiB: the window did not grow
    t.issued(1, *next, next->end());    // all of it: no change, the window grows on
    auto after = t.on_read(1, 192 * KiB, 64 * KiB, true);
    REQUIRE(after);
    CHECK(after->offset == 512 * KiB);
    CHECK(after->length == 512 * KiB);
}
