// The RAM backend's page source: zeroed, page-aligned pages carved in order
// out of 2 MiB chunks (so a sequentially written range is one piece when
// read pinned), and pages given back are reused zeroed.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "backend/factory.hpp"
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

// The VmFlags line of the mapping holding `at` in /proc/self/smaps ("" if none).
std::string vm_flags_at(const void* at) {
    std::ifstream smaps("/proc/self/smaps");
    const auto addr = reinterpret_cast<std::uintptr_t>(at);
    bool inside = false;
    for (std::string line; std::getline(smaps, line);) {
        std::uintptr_t lo = 0, hi = 0;
        char dash = 0;
        std::istringstream head(line);
        if (line.find(':') > line.find('-') && (head >> std::hex >> lo >> dash >> hi) && dash == '-') {
            inside = lo <= addr && addr < hi;
            continue;
        }
        if (inside && line.rfind("VmFlags:", 0) == 0) return line;
    }
    return "";
}

bool has_flag(const std::string& vm_flags, const std::string& flag) {
    return vm_flags.find(" " + flag + " ") != std::string::npos || vm_flags.ends_with(" " + flag);
}

}   // namespace

TEST_CASE("page arena: chunks ask for transparent huge pages, or refuse them with huge false") {
    // hg: MADV_HUGEPAGE, nh: MADV_NOHUGEPAGE (proc(5)). Whether the kernel
    // then backs the chunk with a huge page is its THP mode's business.
    for (const bool huge : {true, false}) {
        INFO("huge: " << huge);
        PageArena arena(huge);
        std::byte* page = arena.take();
        REQUIRE(page != nullptr);
        const std::string flags = vm_flags_at(page);
        INFO(flags);
        CHECK(has_flag(flags, huge ? "hg" : "nh"));
        CHECK_FALSE(has_flag(flags, huge ? "nh" : "hg"));
    }
}

TEST_CASE("ram: a device's huge_pages reaches its pages through the factory") {
    for (const bool huge : {true, false}) {
        INFO("huge_pages: " << huge);
        Spec spec;
        spec.name = "d0";
        spec.size = 64 << 20;
        spec.huge_pages = huge;
        std::string error;
        auto ram = make_backend(spec, error);
        REQUIRE(ram != nullptr);
        REQUIRE(ram->write(0, byte_pattern(0, 4096), false) == 0);
        std::vector<std::span<const std::byte>> pieces;
        const auto pin = ram->read_pinned(0, 4096, pieces);
        REQUIRE(pin);
        REQUIRE(pieces.size() == 1);
        const std::string flags = vm_flags_at(pieces[0].data());
        INFO(flags);
        CHECK(has_flag(flags, huge ? "hg" : "nh"));
        CHECK_FALSE(has_flag(flags, huge ? "nh" : "hg"));
        ram->unpin(*pin);
    }
}

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
