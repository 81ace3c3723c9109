// RAM backend writes received in place (write_pinned): the spans are the
// device's pages, allocated as needed, so bytes put there are its data; a
// range out of bounds pins and allocates nothing; pages a TRIM frees while
// pinned wait for the last unpin(), so bytes still arriving never land in
// freed memory; the fault-injection wrapper does not offer it. Threads write
// in place while others trim and pin (tsan suite).
//
// Zeros received in place cost nothing: after unpin_written(), the pages a
// write_pinned() created and left all zeros are holes again (memory and
// block status; a leaf table left empty goes too), while pages holding any
// non-zero byte, pages there before the write, pages a range covers only in
// part and pages NO_HOLE zeroes provisioned meanwhile stay; a pin that may
// reach a freed page holds it (retired); a payload given up on gives back
// the pages nothing came into.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t page = RamBackend::page_bytes;

// The holes of [offset, offset+length), page by page: true for a hole.
std::vector<bool> holes(RamBackend& ram, std::uint64_t offset, std::uint64_t length) {
    ExtentList list(1 << 20);
    REQUIRE(ram.extents(offset, length, list) == 0);
    std::vector<bool> out;
    for (const auto& e : list.items())
        for (std::uint64_t i = 0; i < e.length / page; ++i) out.push_back(e.hole);
    return out;
}

// Bytes of data (not holes) in [offset, offset+length), as extents say.
std::uint64_t data_bytes(RamBackend& ram, std::uint64_t offset, std::uint64_t length) {
    ExtentList list(1 << 20);
    REQUIRE(ram.extents(offset, length, list) == 0);
    std::uint64_t n = 0;
    for (const auto& e : list.items())
        if (!e.hole) n += e.length;
    return n;
}

std::uint64_t total(const std::vector<std::span<std::byte>>& pieces) {
    std::uint64_t n = 0;
    for (auto p : pieces) n += p.size();
    return n;
}

// Puts `data` into the pieces in order, as a receive would.
void put(const std::vector<std::span<std::byte>>& pieces, const std::vector<std::byte>& data) {
    std::size_t at = 0;
    for (auto p : pieces) {
        std::memcpy(p.data(), data.data() + at, p.size());
        at += p.size();
    }
}

// How a write in place ends: unpin() keeps whatever it allocated;
// unpin_written() settles its pages, as the daemon ends every one.
enum class Ending { unpin,
                    unpin_written };

// A whole payload `data` received in place at `offset`, then ended so.
void receive_in_place(RamBackend& ram, std::uint64_t offset, const std::vector<std::byte>& data, Ending ending) {
    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(offset, data.size(), pieces);
    REQUIRE(pin);
    put(pieces, data);
    if (ending == Ending::unpin)
        ram.unpin(*pin);
    else
        ram.unpin_written(*pin, offset, data.size());
}

}   // namespace

TEST_CASE("ram: bytes put into a pinned write's pieces are the device's data, every page allocated") {
    RamBackend ram(64 << 20);
    std::vector<std::span<std::byte>> pieces;
    const std::uint64_t offset = (8 << 20) + 1000, length = 3 * 4096 + 500;   // 4 pages, unaligned at both ends
    const auto pin = ram.write_pinned(offset, length, pieces);
    REQUIRE(pin);
    CHECK(total(pieces) == length);
    CHECK(ram.allocated_bytes() == 4 * 4096);
    put(pieces, byte_pattern(offset, length));
    ram.unpin(*pin);
    std::vector<std::byte> back(length + 2000);
    REQUIRE(ram.read(offset - 1000, back) == 0);
    CHECK(all_zero(std::span(back).first(1000)));
    CHECK(is_pattern(std::span(back).subspan(1000, length), offset));
    CHECK(all_zero(std::span(back).subspan(1000 + length)));

    // Zeros written this way allocate too (the caller keeps holes by not asking).
    pieces.clear();
    const auto zeros_pin = ram.write_pinned(32 << 20, 8192, pieces);
    REQUIRE(zeros_pin);
    ram.unpin(*zeros_pin);
    CHECK(ram.allocated_bytes() == 6 * 4096);
    // Pages taken in order from the arena join into one piece.
    pieces.clear();
    const auto joined_pin = ram.write_pinned(40 << 20, 1 << 20, pieces);
    REQUIRE(joined_pin);
    CHECK(pieces.size() <= 2);
    ram.unpin(*joined_pin);
    CHECK(ram.retired_pages() == 0);
}

TEST_CASE("ram: a pinned write out of range pins and allocates nothing") {
    RamBackend ram(16 << 20);
    REQUIRE(ram.write(0, byte_pattern(0, 4096), false) == 0);
    const auto metadata = ram.metadata_bytes();
    std::vector<std::span<std::byte>> pieces;
    CHECK_FALSE(ram.write_pinned((16 << 20) - 100, 4096, pieces));
    CHECK_FALSE(ram.write_pinned(UINT64_MAX - 10, 4096, pieces));
    CHECK(pieces.empty());
    CHECK(ram.allocated_bytes() == 4096);
    CHECK(ram.metadata_bytes() == metadata);
    REQUIRE(ram.trim(0, 4096, false) == 0);
    CHECK(ram.retired_pages() == 0);   // no pin left behind: the page was freed at once
}

TEST_CASE("ram: pages trimmed under a pinned write wait for unpin; later bytes are lost, not written to freed memory") {
    RamBackend ram(16 << 20);
    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(0, 64 << 10, pieces);
    REQUIRE(pin);
    REQUIRE(ram.trim(0, 64 << 10, false) == 0);
    CHECK(ram.allocated_bytes() == 0);
    CHECK(ram.retired_pages() == 16);
    put(pieces, byte_pattern(0, 64 << 10));   // ASan: poisoned (freed) pages would be reported here
    ram.unpin(*pin);
    CHECK(ram.retired_pages() == 0);
    std::vector<std::byte> back(64 << 10);
    REQUIRE(ram.read(0, back) == 0);
    CHECK(all_zero(back));   // the TRIM and the WRITE were in flight together: either order is allowed
}

TEST_CASE("ram: fault injection does not let writes around it") {
    FaultyBackend faulty(std::make_unique<RamBackend>(1 << 20), {});
    std::vector<std::span<std::byte>> pieces;
    CHECK_FALSE(faulty.write_pinned(0, 4096, pieces));
    CHECK(static_cast<RamBackend&>(faulty.inner()).allocated_bytes() == 0);
    // Nor written as they arrive: its write() must see each one.
    CHECK(faulty.inner().writes_to_memory());
    CHECK_FALSE(faulty.writes_to_memory());
}

// unpin() keeps what a write in place allocated, but those pages stay the
// write's until an unpin_written() over them settles them (the daemon
// settles every one so): zeros received there later give them back.
TEST_CASE("ram: pages of a write in place ended with unpin() stay unsettled until unpin_written() over them") {
    RamBackend ram(1 << 20);
    const auto data = byte_pattern(0, 4 * page);
    const std::vector<std::byte> zeros(4 * page);
    receive_in_place(ram, 0, data, Ending::unpin);
    CHECK(ram.allocated_bytes() == 4 * page);
    receive_in_place(ram, 0, zeros, Ending::unpin_written);
    CHECK(ram.allocated_bytes() == 0);
    // Settled ones stay, as pages write() made do.
    receive_in_place(ram, 0, data, Ending::unpin_written);
    receive_in_place(ram, 0, zeros, Ending::unpin_written);
    CHECK(ram.allocated_bytes() == 4 * page);
}

// Writers alternate data and zeros and end with unpin_written(), so pages
// are given back while trims free them and pinned reads retire them.
TEST_CASE("ram: writers in place racing trims and pinned reads never write freed pages; accounting matches extents") {
    constexpr std::uint64_t region = 256 << 10;
    RamBackend ram(2 * region);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::vector<std::thread> threads;
    for (std::uint64_t t = 0; t < 2; ++t)
        threads.emplace_back([&, t] {
            const auto data = byte_pattern(t * region, region);
            const std::vector<std::byte> zeros(region);
            std::vector<std::span<std::byte>> pieces;
            for (int i = 0; !stop; ++i) {
                pieces.clear();
                const auto pin = ram.write_pinned(t * region, region, pieces);
                if (!pin) {
                    ++bad;
                    continue;
                }
                put(pieces, i % 2 ? zeros : data);
                if (i % 4 == 0)
                    ram.unpin(*pin);   // allocated whatever it holds
                else
                    ram.unpin_written(*pin, t * region, region);
            }
        });
    threads.emplace_back([&] {   // replies sent from the pages: pins that retire what is freed
        std::vector<std::span<const std::byte>> pieces;
        while (!stop) {
            pieces.clear();
            if (auto pin = ram.read_pinned(0, 2 * region, pieces)) ram.unpin(*pin);
        }
    });
    for (int i = 0; i < 200; ++i) {
        const std::uint64_t at = (i % 8) * (region / 4);
        REQUIRE(ram.trim(at, region / 4, false) == 0);
    }
    stop = true;
    for (auto& th : threads) th.join();
    CHECK(bad == 0);
    CHECK(ram.retired_pages() == 0);
    CHECK(ram.allocated_bytes() == data_bytes(ram, 0, 2 * region));
    // Each page holds the pattern or, trimmed or zeroed last, zeros: never anything else.
    std::vector<std::byte> back(2 * region);
    REQUIRE(ram.read(0, back) == 0);
    for (std::uint64_t p = 0; p < 2 * region / page; ++p) {
        auto bytes = std::span(back).subspan(p * page, page);
        if (!is_pattern(bytes, p * page) && !all_zero(bytes)) ++bad;
    }
    CHECK(bad == 0);
    // A writer whose last write in place ended with unpin() left the pages
    // that write created unsettled (still marked as that write's): the next
    // unpin_written() over them may give back those of them holding zeros.
    // The daemon ends every write in place with unpin_written(), a given-up
    // one too; so here: one given up over everything settles them.
    std::vector<std::span<std::byte>> pieces;
    const auto settle = ram.write_pinned(0, 2 * region, pieces);
    REQUIRE(settle);
    ram.unpin_written(*settle, 0, 2 * region);
    CHECK(ram.allocated_bytes() == data_bytes(ram, 0, 2 * region));
    // Zeros in place over what is left: the pages that were there stay, and the holes stay holes.
    const auto allocated = ram.allocated_bytes();
    receive_in_place(ram, 0, std::vector<std::byte>(2 * region), Ending::unpin_written);
    CHECK(ram.allocated_bytes() == allocated);
}

TEST_CASE("ram: zeros received in place over holes are holes again (tables too); data, old pages, a last non-zero byte stay") {
    RamBackend ram(64 << 20);
    const std::uint64_t base = 8 << 20;
    // Page 10 was there before (written, then zeros written over it with write(): still allocated).
    REQUIRE(ram.write(base + 10 * page, byte_pattern(base + 10 * page, page), false) == 0);
    REQUIRE(ram.write(base + 10 * page, std::vector<std::byte>(page), false) == 0);
    const auto before = ram.allocated_bytes();
    const auto metadata = ram.metadata_bytes();
    REQUIRE(before == page);

    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(base, 16 * page, pieces);
    REQUIRE(pin);
    CHECK(ram.allocated_bytes() == 16 * page);
    std::vector<std::byte> data(16 * page);
    const auto third = byte_pattern(base + 3 * page, page);
    std::memcpy(data.data() + 3 * page, third.data(), page);   // page 3: data
    data[8 * page - 1] = std::byte{1};                         // page 7: one non-zero byte at its very end
    put(pieces, data);
    ram.unpin_written(*pin, base, 16 * page);

    CHECK(ram.allocated_bytes() == 3 * page);   // pages 3, 7 and 10
    CHECK(ram.metadata_bytes() == metadata);
    CHECK(ram.retired_pages() == 0);
    std::vector<bool> expect(16, true);
    expect[3] = expect[7] = expect[10] = false;
    CHECK(holes(ram, base, 16 * page) == expect);
    std::vector<std::byte> back(16 * page);
    REQUIRE(ram.read(base, back) == 0);
    CHECK(back == data);

    // The same range again, all zeros: the pages are there before this write, so they stay.
    pieces.clear();
    const auto again = ram.write_pinned(base, 16 * page, pieces);
    REQUIRE(again);
    put(pieces, std::vector<std::byte>(16 * page));
    ram.unpin_written(*again, base, 16 * page);
    CHECK(ram.allocated_bytes() == 3 * page);
    REQUIRE(ram.read(base, back) == 0);
    CHECK(all_zero(back));

    // Zeros over leaves never written (two, 16 MiB each): their tables go too.
    pieces.clear();
    const auto fresh_leaves = ram.write_pinned(40 << 20, 2 << 20, pieces);
    REQUIRE(fresh_leaves);
    CHECK(ram.metadata_bytes() > metadata);
    put(pieces, std::vector<std::byte>(2 << 20));
    ram.unpin_written(*fresh_leaves, 40 << 20, 2 << 20);
    CHECK(ram.metadata_bytes() == metadata);
    CHECK(ram.allocated_bytes() == 3 * page);
}

TEST_CASE("ram: only pages a range covers whole are given back; a range across two leaves settles both") {
    RamBackend ram(64 << 20);
    const std::uint64_t leaf = RamBackend::page_bytes * RamBackend::pages_per_leaf;
    const std::uint64_t offset = leaf - 4 * page - 100, length = 8 * page + 200;   // 10 pages touched, 8 whole
    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(offset, length, pieces);
    REQUIRE(pin);
    CHECK(ram.allocated_bytes() == 10 * page);
    put(pieces, std::vector<std::byte>(length));
    ram.unpin_written(*pin, offset, length);
    // The two edge pages may hold another write's bytes beside ours: kept.
    CHECK(ram.allocated_bytes() == 2 * page);
    std::vector<bool> expect(10, true);
    expect.front() = expect.back() = false;
    CHECK(holes(ram, leaf - 5 * page, 10 * page) == expect);
}

TEST_CASE("ram: a payload given up on gives back the pages nothing came into") {
    RamBackend ram(64 << 20);
    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(0, 1 << 20, pieces);
    REQUIRE(pin);
    put(std::vector<std::span<std::byte>>{pieces.front().first(1000)}, byte_pattern(0, 1000));   // 1000 bytes came
    ram.unpin_written(*pin, 0, 1 << 20);                                                         // the connection closed
    CHECK(ram.allocated_bytes() == page);
    CHECK(holes(ram, 0, 2 * page) == std::vector<bool>{false, true});
    CHECK(data_bytes(ram, 0, 1 << 20) == page);
}

TEST_CASE("ram: a page given back while a pinned read may reach it waits for that read's unpin") {
    RamBackend ram(64 << 20);
    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(0, 64 << 10, pieces);
    REQUIRE(pin);
    std::vector<std::span<const std::byte>> read_pieces;
    const auto read_pin = ram.read_pinned(0, 64 << 10, read_pieces);   // a reply being sent from the pages
    REQUIRE(read_pin);
    ram.unpin_written(*pin, 0, 64 << 10);
    CHECK(ram.allocated_bytes() == 0);
    CHECK(ram.retired_pages() == 16);
    for (auto p : read_pieces) CHECK(all_zero(p));   // ASan: the pages are not poisoned (freed) yet
    ram.unpin(*read_pin);
    CHECK(ram.retired_pages() == 0);
    CHECK(holes(ram, 0, 64 << 10) == std::vector<bool>(16, true));
}

TEST_CASE("ram: NO_HOLE zeroes over a write in place keep its pages; TRIM between frees them once") {
    RamBackend ram(64 << 20);
    std::vector<std::span<std::byte>> pieces;
    const auto pin = ram.write_pinned(0, 16 * page, pieces);
    REQUIRE(pin);
    REQUIRE(ram.write_zeroes(0, 8 * page, false, false) == 0);   // provisioned: must stay allocated
    REQUIRE(ram.trim(8 * page, 8 * page, false) == 0);           // freed (retired: we hold a pin)
    CHECK(ram.allocated_bytes() == 8 * page);
    put(pieces, std::vector<std::byte>(16 * page));
    ram.unpin_written(*pin, 0, 16 * page);
    CHECK(ram.allocated_bytes() == 8 * page);
    CHECK(ram.retired_pages() == 0);
    std::vector<bool> expect(16, true);
    std::fill_n(expect.begin(), 8, false);
    CHECK(holes(ram, 0, 16 * page) == expect);
}
