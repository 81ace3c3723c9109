// Reads covered by more than one piece of read-ahead: several prefetches in
// flight, cache plus prefetches, and partial coverage (fills). A 1 MiB read
// of a 2560 KiB window split at the 1280 KiB max I/O size straddles two
// prefetch chunks; before, such a read went to the disk a second time.
#include <doctest/doctest.h>

#include <algorithm>
#include <deque>

#include "backend/ram_backend.hpp"
#include "readahead/readahead.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::readahead;
using namespace nbdsched::testlib;
using Kind = ReadDecision::Kind;

namespace {

constexpr std::uint64_t KiB = 1024;
constexpr std::uint64_t MiB = 1024 * KiB;

Options opts(std::uint64_t window, std::uint64_t max_io = 1280 * KiB) {
    Options o;
    o.device_size = 64 * MiB;
    o.window_bytes = window;
    o.cache_bytes = 64 * MiB;
    o.max_io_bytes = max_io;
    return o;
}

// A disk serving prefetches one at a time in the order they were issued,
// and only when the test says so: nothing completes behind the reader's back.
class FifoDisk {
public:
    FifoDisk() { REQUIRE(ram_.write(0, byte_pattern(0, 64 * MiB), false) == 0); }

    void add(const std::vector<Prefetch>& list) { pending_.insert(pending_.end(), list.begin(), list.end()); }
    void complete(ReadAhead& ra, std::uint64_t ticket, int error = 0) {
        auto it = std::find_if(pending_.begin(), pending_.end(), [&](const Prefetch& p) { return p.ticket == ticket; });
        REQUIRE(it != pending_.end());
        std::vector<std::byte> data(error == 0 ? it->length : 0);
        if (error == 0)
            REQUIRE(ram_.read(it->offset, data) == 0);
        ra.on_prefetch_done(ticket, error, std::move(data));
        pending_.erase(it);
    }
    // FIFO: everything issued up to and including `ticket`.
    void complete_through(ReadAhead& ra, std::uint64_t ticket) {
        while (!pending_.empty() && pending_.front().ticket <= ticket)
            complete(ra, pending_.front().ticket);
    }
    const std::deque<Prefetch>& pending() const { return pending_; }
    RamBackend& ram() { return ram_; }

private:
    RamBackend ram_{64 * MiB};
    std::deque<Prefetch> pending_;
};

// Issues a read and files its prefetches with the disk.
ReadDecision read(ReadAhead& ra, FifoDisk& disk, std::uint64_t queue, std::uint64_t offset,
                  std::vector<std::byte>& buf) {
    auto d = ra.on_read(queue, offset, buf);
    disk.add(d.prefetch);
    return d;
}

// One queue's stream after its first two 1 MiB reads (at 0 and 1 MiB):
// both missed, and the second asked for the first window.
struct Started {
    FifoDisk disk;
    ReadAhead ra;
    ReadDecision second;
    explicit Started(std::uint64_t window, std::uint64_t max_io = 1280 * KiB) : ra(opts(window, max_io)) {
        std::vector<std::byte> buf(1 * MiB);
        REQUIRE(read(ra, disk, 1, 0, buf).kind == Kind::miss);
        second = read(ra, disk, 1, 1 * MiB, buf);
        REQUIRE(second.kind == Kind::miss);
    }
};

}   // namespace

TEST_CASE("read-ahead cover: a read straddling two prefetches in flight waits for both") {
    Started st(2560 * KiB);
    auto& [disk, ra, second] = st;
    // The window [2 MiB, 4.5 MiB) in two max-I/O chunks.
    REQUIRE(second.prefetch.size() == 2);
    const Prefetch a = second.prefetch[0], b = second.prefetch[1];
    CHECK(a.offset == 2 * MiB);
    CHECK(b.offset == a.offset + 1280 * KiB);
    CHECK(b.end() - a.offset == 2560 * KiB);

    std::vector<std::byte> r4(1 * MiB);
    auto d4 = ra.on_read(1, 3 * MiB, r4);   // [3 MiB, 4 MiB): the end of a, the start of b
    disk.add(d4.prefetch);
    REQUIRE(d4.kind == Kind::wait);
    CHECK(d4.wait_ticket == b.ticket);   // the part furthest on: on a FIFO disk it lands last

    SUBCASE("they land in order") {
        disk.complete(ra, a.ticket);
        disk.complete(ra, b.ticket);
        REQUIRE(ra.resume(3 * MiB, r4).kind == Kind::hit);
    }
    SUBCASE("they land out of order: waits again for the other one") {
        disk.complete(ra, b.ticket);
        auto again = ra.resume(3 * MiB, r4);
        REQUIRE(again.kind == Kind::wait);
        CHECK(again.wait_ticket == a.ticket);
        CHECK(again.prefetch.empty());
        disk.complete(ra, a.ticket);
        REQUIRE(ra.resume(3 * MiB, r4).kind == Kind::hit);
    }
    CHECK(is_pattern(r4, 3 * MiB));
    const Stats s = ra.stats();
    CHECK(s.misses == 2);
    CHECK(s.waits == 1);
    CHECK(s.fills == 0);
    CHECK(s.waits_failed == 0);
}

TEST_CASE("read-ahead cover: part cached, part in flight waits, then hits") {
    Started st(2560 * KiB);
    auto& [disk, ra, second] = st;
    REQUIRE(second.prefetch.size() == 2);
    disk.complete(ra, second.prefetch[0].ticket);   // [2 MiB, 3.25 MiB) cached
    std::vector<std::byte> r(1 * MiB);
    auto d = ra.on_read(1, 3 * MiB, r);
    disk.add(d.prefetch);
    REQUIRE(d.kind == Kind::wait);
    CHECK(d.wait_ticket == second.prefetch[1].ticket);
    disk.complete(ra, second.prefetch[1].ticket);
    REQUIRE(ra.resume(3 * MiB, r).kind == Kind::hit);
    CHECK(is_pattern(r, 3 * MiB));
}

TEST_CASE("read-ahead cover: a sequential 1 MiB reader never misses, its next read is always requested") {
    FifoDisk disk;
    ReadAhead ra(opts(2560 * KiB));
    std::vector<std::byte> buf(1 * MiB);
    std::uint64_t requested_end = 0;   // the furthest byte any prefetch asked for
    for (std::uint64_t off = 0; off + buf.size() <= 48 * MiB; off += buf.size()) {
        CAPTURE(off);
        auto d = read(ra, disk, 1, off, buf);
        for (const auto& p : d.prefetch) {
            CHECK_FALSE(p.demand);
            requested_end = std::max(requested_end, p.end());
        }
        if (off >= 2 * MiB) {
            REQUIRE(d.kind != Kind::miss);
            // Async read-ahead: the next read is already wholly requested,
            // so the reader never waits for a window it asks for itself.
            CHECK(requested_end >= off + 2 * buf.size());
        }
        // The disk serves only what the reader waits for (and what was
        // issued before it): the worst case for the pipeline.
        while (d.kind == Kind::wait) {
            disk.complete_through(ra, d.wait_ticket);
            d = ra.resume(off, buf);
        }
        if (d.kind == Kind::miss)
            REQUIRE(disk.ram().read(off, buf) == 0);
        REQUIRE(is_pattern(buf, off));
    }
    const Stats s = ra.stats();
    CHECK(s.misses == 2);   // the two reads that detect the stream
    CHECK(s.waits_failed == 0);
    CHECK(s.fills == 0);
    CHECK(s.bytes_cached + s.bytes_inflight <= 64 * MiB);
}

TEST_CASE("read-ahead cover: part cached, the rest not in flight: a fill of just the missing part") {
    Started st(128 * KiB, 512 * KiB);
    auto& [disk, ra, second] = st;
    REQUIRE(second.prefetch.size() == 1);   // a 128 KiB window: [2 MiB, 2 MiB + 128 KiB)
    disk.complete(ra, second.prefetch[0].ticket);

    std::vector<std::byte> r(1 * MiB);
    auto d = read(ra, disk, 1, 2 * MiB, r);
    REQUIRE(d.kind == Kind::wait);
    // The missing 896 KiB, split at max I/O, then the stream's next window.
    REQUIRE(d.prefetch.size() == 3);
    CHECK(d.prefetch[0].demand);
    CHECK(d.prefetch[1].demand);
    CHECK(d.prefetch[0].offset == 2 * MiB + 128 * KiB);
    CHECK(d.prefetch[0].length == 512 * KiB);
    CHECK(d.prefetch[1].end() == 3 * MiB);
    CHECK(d.wait_ticket == d.prefetch[1].ticket);
    CHECK_FALSE(d.prefetch[2].demand);
    CHECK(d.prefetch[2].offset == 3 * MiB);

    disk.complete(ra, d.prefetch[1].ticket);   // the last part first
    auto again = ra.resume(2 * MiB, r);
    REQUIRE(again.kind == Kind::wait);
    CHECK(again.wait_ticket == d.prefetch[0].ticket);
    disk.complete(ra, d.prefetch[0].ticket);
    REQUIRE(ra.resume(2 * MiB, r).kind == Kind::hit);
    CHECK(is_pattern(r, 2 * MiB));
    const Stats s = ra.stats();
    CHECK(s.fills == 1);
    CHECK(s.bytes_filled == 896 * KiB);
    CHECK(s.misses == 2);
    CHECK(s.waits == 1);
}

TEST_CASE("read-ahead cover: gaps on both sides of cached data become one fill") {
    Started st(128 * KiB);
    auto& [disk, ra, second] = st;
    REQUIRE(second.prefetch.size() == 1);
    disk.complete(ra, second.prefetch[0].ticket);   // [2 MiB, 2 MiB + 128 KiB)
    // Another client reads across it: a new stream of its own, no window.
    std::vector<std::byte> r(1 * MiB);
    auto d = read(ra, disk, 2, 1536 * KiB, r);
    REQUIRE(d.kind == Kind::wait);
    REQUIRE(d.prefetch.size() == 1);
    CHECK(d.prefetch[0].demand);
    CHECK(d.prefetch[0].offset == 1536 * KiB);
    CHECK(d.prefetch[0].length == 1 * MiB);   // re-reads the cached middle rather than skip it
    disk.complete(ra, d.prefetch[0].ticket);
    REQUIRE(ra.resume(1536 * KiB, r).kind == Kind::hit);
    CHECK(is_pattern(r, 1536 * KiB));
}

TEST_CASE("read-ahead cover: no fill over a pending write, a failed fill falls back to a miss") {
    Started st(128 * KiB);
    auto& [disk, ra, second] = st;
    disk.complete(ra, second.prefetch.at(0).ticket);
    std::vector<std::byte> r(1 * MiB);

    SUBCASE("a write pending over the missing part: the read goes to the backend") {
        ra.on_write(2 * MiB + 512 * KiB, 4 * KiB);
        auto d = read(ra, disk, 1, 2 * MiB, r);
        CHECK(d.kind == Kind::miss);
        CHECK(std::none_of(d.prefetch.begin(), d.prefetch.end(), [](const Prefetch& p) { return p.demand; }));
        CHECK(ra.stats().fills == 0);
    }
    SUBCASE("the fill fails: resume says miss") {
        auto d = read(ra, disk, 1, 2 * MiB, r);
        REQUIRE(d.kind == Kind::wait);
        disk.complete(ra, d.wait_ticket, 5);
        CHECK(ra.resume(2 * MiB, r).kind == Kind::miss);
        CHECK(ra.stats().waits_failed == 1);
    }
    SUBCASE("nothing cached or in flight: a plain miss, no fill") {
        auto d = read(ra, disk, 3, 40 * MiB, r);
        CHECK(d.kind == Kind::miss);
        CHECK(d.prefetch.empty());
    }
}
