#include <doctest/doctest.h>

#include <cerrno>

#include "backend/ram_backend.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

TEST_CASE("ram: never-written pages read as zeros and cost nothing") {
    RamBackend ram(std::uint64_t{1} << 40);   // 1 TiB, sparse
    CHECK(ram.size() == std::uint64_t{1} << 40);
    CHECK_FALSE(ram.blocking());
    CHECK_FALSE(ram.detected_rotational().has_value());
    std::vector<std::byte> buf(1 << 20, std::byte{0xff});
    CHECK(ram.read((std::uint64_t{1} << 40) - buf.size(), buf) == 0);
    CHECK(all_zero(buf));
    CHECK(ram.allocated_bytes() == 0);
    CHECK(ram.metadata_bytes() < (1u << 20));   // top table only
    CHECK(ram.describe() == "ram 1TiB");
}

TEST_CASE("ram: unaligned write/read round trip across pages and leaves") {
    RamBackend ram(64 << 20);
    const std::uint64_t off = (16 << 20) - 5000;   // straddles a 16 MiB leaf boundary
    auto data = byte_pattern(off, 12345);
    REQUIRE(ram.write(off, data, false) == 0);
    std::vector<std::byte> back(12345);
    REQUIRE(ram.read(off, back) == 0);
    CHECK(is_pattern(back, off));
    // 904 bytes in the first page, two full pages, 3249 bytes in a fourth.
    CHECK(ram.allocated_bytes() == 4 * RamBackend::page_bytes);
    std::vector<std::byte> around(100);
    REQUIRE(ram.read(off - 100, around) == 0);
    CHECK(all_zero(around));
}

TEST_CASE("ram: zero writes over holes allocate nothing") {
    RamBackend ram(1 << 20);
    std::vector<std::byte> zeros(65536);
    CHECK(ram.write(0, zeros, false) == 0);
    CHECK(ram.allocated_bytes() == 0);
}

TEST_CASE("ram: trim and write_zeroes free whole pages and zero partial ones") {
    RamBackend ram(32 << 20);
    auto data = byte_pattern(0, 32 << 20);
    REQUIRE(ram.write(0, data, false) == 0);
    CHECK(ram.allocated_bytes() == std::uint64_t{32} << 20);

    CHECK(ram.trim(100, 3 * 4096, false) == 0);   // pages 1, 2 freed; 0 and 3 partially zeroed
    CHECK(ram.allocated_bytes() == (std::uint64_t{32} << 20) - 2 * 4096);
    std::vector<std::byte> back(5 * 4096);
    REQUIRE(ram.read(0, back) == 0);
    for (std::size_t i = 0; i < back.size(); ++i) {
        const bool zeroed = i >= 100 && i < 100 + 3 * 4096;
        if (zeroed ? back[i] != std::byte{0} : back[i] != data[i]) {
            FAIL("byte " << i << " wrong");
            break;
        }
    }
    CHECK(ram.write_zeroes(0, 16 << 20, true, false) == 0);   // a whole leaf, holes allowed
    CHECK(ram.allocated_bytes() == std::uint64_t{16} << 20);
    CHECK(ram.write_zeroes(16 << 20, 16 << 20, true, true) == 0);
    CHECK(ram.allocated_bytes() == 0);
    std::vector<std::byte> all(32 << 20);
    REQUIRE(ram.read(0, all) == 0);
    CHECK(all_zero(all));
    // Writing again after a leaf was freed works.
    REQUIRE(ram.write(4096, byte_pattern(4096, 4096), false) == 0);
    std::vector<std::byte> page(4096);
    REQUIRE(ram.read(4096, page) == 0);
    CHECK(is_pattern(page, 4096));
}

TEST_CASE("ram: write_zeroes with NO_HOLE allocates the range, zero-filled") {
    RamBackend ram(32 << 20);
    // Over a hole: every page the range touches is allocated, partial ones too
    // (4096 + 100 .. 3 * 4096 + 50 touches pages 1, 2 and 3).
    CHECK(ram.write_zeroes(4096 + 100, 2 * 4096 - 50, false, false) == 0);
    CHECK(ram.allocated_bytes() == 3 * RamBackend::page_bytes);
    // Across a leaf boundary, over data: the data becomes zeros and stays allocated.
    const std::uint64_t off = (16 << 20) - 8192;
    REQUIRE(ram.write(off, byte_pattern(off, 16384), false) == 0);
    CHECK(ram.allocated_bytes() == 7 * RamBackend::page_bytes);
    CHECK(ram.write_zeroes(off - 4096, 4 * 4096 + 4096, false, true) == 0);
    CHECK(ram.allocated_bytes() == 8 * RamBackend::page_bytes);
    std::vector<std::byte> back(6 * 4096, std::byte{0xff});
    REQUIRE(ram.read(off - 4096, back) == 0);
    CHECK(all_zero(back));
    // A whole leaf, provisioned.
    CHECK(ram.write_zeroes(16 << 20, 16 << 20, false, false) == 0);
    CHECK(ram.allocated_bytes() == (std::uint64_t{16} << 20) + 6 * RamBackend::page_bytes);
    // Without NO_HOLE the same range is freed again.
    CHECK(ram.write_zeroes(0, 32 << 20, true, false) == 0);
    CHECK(ram.allocated_bytes() == 0);
    std::vector<std::byte> all(32 << 20, std::byte{0xff});
    REQUIRE(ram.read(0, all) == 0);
    CHECK(all_zero(all));
}

TEST_CASE("ram: out of range is EINVAL, flush is a no-op") {
    RamBackend ram(8192);
    std::vector<std::byte> buf(4096);
    CHECK(ram.read(8192 - 4095, buf) == EINVAL);
    CHECK(ram.write(UINT64_MAX - 10, buf, false) == EINVAL);
    CHECK(ram.trim(0, 8193, false) == EINVAL);
    CHECK(ram.write_zeroes(8192, 1, false, false) == EINVAL);
    CHECK(ram.read(8192, std::span<std::byte>()) == 0);
    CHECK(ram.flush() == 0);
}
