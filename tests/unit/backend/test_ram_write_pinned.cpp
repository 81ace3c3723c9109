// RAM backend writes received in place (write_pinned): the spans are the
// device's pages, allocated as needed, so bytes put there are its data; a
// range out of bounds pins and allocates nothing; pages a TRIM frees while
// pinned wait for the last unpin(), so bytes still arriving never land in
// freed memory; the fault-injection wrapper does not offer it. Threads write
// in place while others trim (tsan suite).
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
}

TEST_CASE("ram: writers in place racing trims never write freed pages") {
    constexpr std::uint64_t region = 256 << 10;
    RamBackend ram(2 * region);
    std::atomic<bool> stop{false};
    std::atomic<int> bad{0};
    std::vector<std::thread> writers;
    for (std::uint64_t t = 0; t < 2; ++t)
        writers.emplace_back([&, t] {
            const auto data = byte_pattern(t * region, region);
            std::vector<std::span<std::byte>> pieces;
            while (!stop) {
                pieces.clear();
                const auto pin = ram.write_pinned(t * region, region, pieces);
                if (!pin) {
                    ++bad;
                    continue;
                }
                put(pieces, data);
                ram.unpin(*pin);
            }
        });
    for (int i = 0; i < 200; ++i) {
        const std::uint64_t at = (i % 8) * (region / 4);
        REQUIRE(ram.trim(at, region / 4, false) == 0);
    }
    stop = true;
    for (auto& th : writers) th.join();
    CHECK(bad == 0);
    CHECK(ram.retired_pages() == 0);
    // Each page holds the pattern or, trimmed last, zeros: never anything else.
    std::vector<std::byte> back(2 * region);
    REQUIRE(ram.read(0, back) == 0);
    for (std::uint64_t p = 0; p < 2 * region / 4096; ++p) {
        auto page = std::span(back).subspan(p * 4096, 4096);
        if (!is_pattern(page, p * 4096) && !all_zero(page)) ++bad;
    }
    CHECK(bad == 0);
}
