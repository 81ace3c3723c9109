// The RAM backend's page source: zeroed, page-aligned pages carved in order
// out of 2 MiB chunks (so a sequentially written range is one piece when
// read pinned), and pages given back are reused zeroed.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "backend/page_arena.hpp"
#include "backend/ram_backend.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

bool all_zero(const std::byte* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
        if (p[i] != std::byte{0}) return false;
    return true;
}

}   // namespace

TEST_CASE("page arena: pages are zeroed, aligned, in order, and a chunk is mapped at a time") {
    PageArena arena;
    CHECK(arena.mapped_bytes() == 0);
    std::vector<std::byte*> pages;
    for (std::size_t i = 0; i < PageArena::chunk_bytes / PageArena::page_bytes + 1; ++i) {
        std::byte* p = arena.take();
        REQUIRE(p != nullptr);
        pages.push_back(p);
    }
    CHECK(reinterpret_cast<std::uintptr_t>(pages[0]) % PageArena::chunk_bytes == 0);
    bool in_order = true, zeroed = true;
    for (std::size_t i = 0; i + 1 < pages.size() - 1; ++i) in_order &= pages[i + 1] == pages[i] + PageArena::page_bytes;
    for (auto* p : pages) zeroed &= all_zero(p, PageArena::page_bytes);
    CHECK(in_order);
    CHECK(zeroed);
    CHECK(arena.mapped_bytes() == 2 * PageArena::chunk_bytes);   // the last page opened a second chunk
}

TEST_CASE("page arena: a page given back comes back zeroed before new ones are carved") {
    PageArena arena;
    std::byte* a = arena.take();
    std::byte* b = arena.take();
    REQUIRE(a != nullptr);
    REQUIRE(b != nullptr);
    std::memset(a, 0x5a, PageArena::page_bytes);
    arena.give(a);
    std::byte* again = arena.take();
    CHECK(again == a);
    CHECK(all_zero(again, PageArena::page_bytes));
    CHECK(arena.take() == b + PageArena::page_bytes);
}

TEST_CASE("ram: a range written in order is one piece when read pinned") {
    RamBackend ram(64 << 20);
    const auto data = byte_pattern(8 << 20, 1 << 20);
    REQUIRE(ram.write(8 << 20, data, false) == 0);
    std::vector<std::span<const std::byte>> pieces;
    const auto pin = ram.read_pinned(8 << 20, 1 << 20, pieces);
    REQUIRE(pin);
    REQUIRE(pieces.size() == 1);
    CHECK(std::memcmp(pieces[0].data(), data.data(), data.size()) == 0);
    ram.unpin(*pin);
}
