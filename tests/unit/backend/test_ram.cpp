#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "backend/ram_backend.hpp"
#include "common/units.hpp"
#include "helpers.hpp"

using namespace nbdsched::backend;
using test::all_zero;
using test::is_pattern;
using test::pattern;

TEST_CASE("ram: never-written pages read as zeros and cost nothing")
{
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

TEST_CASE("ram: unaligned write/read round trip across pages and leaves")
{
    RamBackend ram(64 << 20);
    const std::uint64_t off = (16 << 20) - 5000;   // straddles a 16 MiB leaf boundary
    auto data = pattern(off, 12345);
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

TEST_CASE("ram: zero writes over holes allocate nothing")
{
    RamBackend ram(1 << 20);
    std::vector<std::byte> zeros(65536);
    CHECK(ram.write(0, zeros, false) == 0);
    CHECK(ram.allocated_bytes() == 0);
}

TEST_CASE("ram: trim and write_zeroes free whole pages and zero partial ones")
{
    RamBackend ram(32 << 20);
    auto data = pattern(0, 32 << 20);
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
    REQUIRE(ram.write(4096, pattern(4096, 4096), false) == 0);
    std::vector<std::byte> page(4096);
    REQUIRE(ram.read(4096, page) == 0);
    CHECK(is_pattern(page, 4096));
}

TEST_CASE("ram: write_zeroes with NO_HOLE allocates the range, zero-filled")
{
    RamBackend ram(32 << 20);
    // Over a hole: every page the range touches is allocated, partial ones too
    // (4096 + 100 .. 3 * 4096 + 50 touches pages 1, 2 and 3).
    CHECK(ram.write_zeroes(4096 + 100, 2 * 4096 - 50, false, false) == 0);
    CHECK(ram.allocated_bytes() == 3 * RamBackend::page_bytes);
    // Across a leaf boundary, over data: the data becomes zeros and stays allocated.
    const std::uint64_t off = (16 << 20) - 8192;
    REQUIRE(ram.write(off, pattern(off, 16384), false) == 0);
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

TEST_CASE("ram: out of range is EINVAL, flush is a no-op")
{
    RamBackend ram(8192);
    std::vector<std::byte> buf(4096);
    CHECK(ram.read(8192 - 4095, buf) == EINVAL);
    CHECK(ram.write(UINT64_MAX - 10, buf, false) == EINVAL);
    CHECK(ram.trim(0, 8193, false) == EINVAL);
    CHECK(ram.write_zeroes(8192, 1, false, false) == EINVAL);
    CHECK(ram.read(8192, std::span<std::byte>()) == 0);
    CHECK(ram.flush() == 0);
}

namespace {

struct Cost {
    double write_ns;
    double read_ns;
};

// Random 4 KiB writes then reads over `pages` pages through `write`/`read`.
template <class W, class R>
Cost measure(std::uint64_t pages, W&& write, R&& read)
{
    const int ops = 100000;
    std::uint64_t x = 12345;
    auto next = [&] {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return (x >> 20) % pages * 4096;
    };
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i)
        write(next());
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i)
        read(next());
    auto t2 = std::chrono::steady_clock::now();
    return {std::chrono::duration<double, std::nano>(t1 - t0).count() / ops,
            std::chrono::duration<double, std::nano>(t2 - t1).count() / ops};
}

} // namespace

TEST_CASE("ram: 4k read/write cost next to a plain memcpy (printed)")
{
    // A cache-resident set shows the backend's own overhead; a large one
    // what a client really sees (memory-bound). Best of 2 runs: CI is noisy.
    for (const std::uint64_t size : {std::uint64_t{2} << 20, std::uint64_t{128} << 20}) {
        const std::uint64_t pages = size / 4096;
        RamBackend ram(size);
        std::vector<std::byte> buf = pattern(0, 4096);
        for (std::uint64_t p = 0; p < pages; ++p)   // pre-allocate: measure steady state
            REQUIRE(ram.write(p * 4096, buf, false) == 0);
        std::vector<std::byte> flat(size, std::byte{1});
        Cost base{1e18, 1e18}, c{1e18, 1e18};
        for (int run = 0; run < 2; ++run) {
            const Cost b = measure(
                pages, [&](std::uint64_t o) { std::memcpy(flat.data() + o, buf.data(), 4096); },
                [&](std::uint64_t o) {
                    std::memcpy(buf.data(), flat.data() + o, 4096);
                    asm volatile("" : : "r"(buf.data()) : "memory");
                });
            const Cost r = measure(
                pages, [&](std::uint64_t o) { (void)ram.write(o, buf, false); },
                [&](std::uint64_t o) { (void)ram.read(o, buf); });
            base = {std::min(base.write_ns, b.write_ns), std::min(base.read_ns, b.read_ns)};
            c = {std::min(c.write_ns, r.write_ns), std::min(c.read_ns, r.read_ns)};
        }
        std::printf("ram 4k random over %s: write %.0f ns/op, read %.0f ns/op "
                    "(plain memcpy on a flat buffer: %.0f / %.0f ns)\n",
                    nbdsched::format_size(size).c_str(), c.write_ns, c.read_ns, base.write_ns, base.read_ns);
        CHECK(c.write_ns < 20000);   // generous: a memcpy plus a lock, even on a loaded CI box
        CHECK(c.read_ns < 20000);
    }
}
