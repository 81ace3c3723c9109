// Allocation maps (NBD_CMD_BLOCK_STATUS), fast zeroing and the CACHE hint of
// the RAM, file and fault-injecting backends.
#include <doctest/doctest.h>

#include <cerrno>
#include <vector>

#include "backend/faulty.hpp"
#include "backend/file_backend.hpp"
#include "backend/ram_backend.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t KiB = 1024, MiB = 1024 * KiB;

struct Run {
    std::uint64_t length;
    bool hole;
    bool operator==(const Run&) const = default;
};

std::vector<Run> map(Backend& b, std::uint64_t offset, std::uint64_t length, std::size_t max = 1000) {
    ExtentList list(max);
    REQUIRE(b.extents(offset, length, list) == 0);
    std::vector<Run> runs;
    std::uint64_t total = 0;
    for (const auto& e : list.items()) {
        runs.push_back({e.length, e.hole});
        total += e.length;
    }
    CHECK(total <= length);
    return runs;
}

void write_ones(Backend& b, std::uint64_t offset, std::uint64_t length) {
    std::vector<std::byte> data(length, std::byte{1});
    REQUIRE(b.write(offset, data, false) == 0);
}

}   // namespace

TEST_CASE("ram: never-written and zeroed-again pages are holes, written pages data") {
    RamBackend ram(64 * MiB);
    CHECK(map(ram, 0, 64 * MiB) == std::vector<Run>{{64 * MiB, true}});
    write_ones(ram, 1 * MiB, 8 * KiB);
    write_ones(ram, 20 * MiB + 100, 10);   // a partial page is a whole data page
    CHECK(map(ram, 0, 64 * MiB) == std::vector<Run>{{1 * MiB, true},
                                                    {8 * KiB, false},
                                                    {19 * MiB - 8 * KiB, true},
                                                    {4 * KiB, false},
                                                    {44 * MiB - 4 * KiB, true}});
    // Writing zeros over a hole keeps it a hole.
    std::vector<std::byte> zeros(64 * KiB);
    REQUIRE(ram.write(30 * MiB, zeros, false) == 0);
    CHECK(map(ram, 30 * MiB, 64 * KiB) == std::vector<Run>{{64 * KiB, true}});
    // A window inside the device: clipped to it, starting mid-extent.
    CHECK(map(ram, 1 * MiB + 4 * KiB, 8 * KiB) == std::vector<Run>{{4 * KiB, false}, {4 * KiB, true}});
    // TRIM and WRITE_ZEROES give the pages back: holes again.
    REQUIRE(ram.trim(1 * MiB, 4 * KiB, false) == 0);
    REQUIRE(ram.write_zeroes(20 * MiB, 4 * KiB, true, false) == 0);
    CHECK(map(ram, 0, 64 * MiB) == std::vector<Run>{{1 * MiB + 4 * KiB, true}, {4 * KiB, false}, {63 * MiB - 8 * KiB, true}});
    // NO_HOLE provisions pages: data (reading zeros).
    REQUIRE(ram.write_zeroes(40 * MiB, 4 * KiB, false, false) == 0);
    CHECK(map(ram, 40 * MiB, 8 * KiB) == std::vector<Run>{{4 * KiB, false}, {4 * KiB, true}});
    // Past the end: refused.
    ExtentList list(10);
    CHECK(ram.extents(64 * MiB - 4096, 8192, list) == EINVAL);
    CHECK(ram.extents(~0ull - 10, 20, list) == EINVAL);
}

TEST_CASE("ram: the list stops at its maximum; fast zero always works") {
    RamBackend ram(1 * MiB);
    for (std::uint64_t at = 0; at < 1 * MiB; at += 8 * KiB) write_ones(ram, at, 4 * KiB);
    CHECK(map(ram, 0, 1 * MiB, 3) == std::vector<Run>{{4 * KiB, false}, {4 * KiB, true}, {4 * KiB, false}});
    CHECK(map(ram, 0, 1 * MiB).size() == 256);
    CHECK(ram.write_zeroes_fast(0, 1 * MiB, true, false) == 0);
    CHECK(map(ram, 0, 1 * MiB) == std::vector<Run>{{1 * MiB, true}});
    CHECK(ram.cache(0, 1 * MiB) == 0);
}

TEST_CASE("file: SEEK_DATA/SEEK_HOLE map; fast zero punches a hole; cache is a hint") {
    TempDir dir;
    std::string error;
    auto file = FileBackend::open({dir.file("sparse.img"), 16 * MiB, false}, error);
    REQUIRE(file);
    CHECK(map(*file, 0, 16 * MiB) == std::vector<Run>{{16 * MiB, true}});
    write_ones(*file, 4 * MiB, 1 * MiB);
    auto runs = map(*file, 0, 16 * MiB);
    // Filesystems allocate in their own blocks; on ext4/xfs/tmpfs a 1 MiB
    // aligned write is exactly one data extent.
    CHECK(runs == std::vector<Run>{{4 * MiB, true}, {1 * MiB, false}, {11 * MiB, true}});
    CHECK(map(*file, 4 * MiB + 512 * KiB, 1 * MiB) == std::vector<Run>{{512 * KiB, false}, {512 * KiB, true}});
    CHECK(map(*file, 0, 16 * MiB, 2) == std::vector<Run>{{4 * MiB, true}, {1 * MiB, false}});
    CHECK(file->write_zeroes_fast(4 * MiB, 1 * MiB, true, false) == 0);
    CHECK(map(*file, 0, 16 * MiB) == std::vector<Run>{{16 * MiB, true}});
    CHECK(file->cache(0, 16 * MiB) == 0);
    CHECK(file->cache(16 * MiB, 1) == EINVAL);
}

TEST_CASE("faulty: extents and cache pass through; fast zero is still a zero for the rules") {
    auto inner = std::make_unique<RamBackend>(1 * MiB);
    write_ones(*inner, 0, 4 * KiB);
    nbdsched::FaultRule rule;
    rule.ops = nbdsched::fault_zeroes;
    rule.error = EIO;
    rule.rate = 1.0;
    FaultyBackend faulty(std::move(inner), {rule});
    CHECK(map(faulty, 0, 1 * MiB) == std::vector<Run>{{4 * KiB, false}, {1 * MiB - 4 * KiB, true}});
    CHECK(faulty.cache(0, 1 * MiB) == 0);
    CHECK(faulty.write_zeroes_fast(0, 4 * KiB, true, false) == EIO);
    faulty.set_enabled(false);
    CHECK(faulty.write_zeroes_fast(0, 4 * KiB, true, false) == 0);
}

TEST_CASE("a backend without a fast zero says ENOTSUP; without a map, all data") {
    struct Plain final : Backend {
        std::uint64_t size() const override { return 4096; }
        bool blocking() const override { return false; }
        std::optional<bool> detected_rotational() const override { return std::nullopt; }
        std::string describe() const override { return "plain"; }
        int read(std::uint64_t, std::span<std::byte>) override { return 0; }
        int write(std::uint64_t, std::span<const std::byte>, bool) override { return 0; }
        int flush() override { return 0; }
        int trim(std::uint64_t, std::uint64_t, bool) override { return 0; }
        int write_zeroes(std::uint64_t, std::uint64_t, bool, bool) override { return 0; }
    } plain;
    CHECK(plain.write_zeroes_fast(0, 4096, true, false) == ENOTSUP);
    CHECK(map(plain, 0, 4096) == std::vector<Run>{{4096, false}});
}
