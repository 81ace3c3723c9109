#include <doctest/doctest.h>

#include <fcntl.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "backend/file_backend.hpp"
#include "backend/file_io.hpp"
#include "case_report.hpp"
#include "concurrent_rmw.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

// O_DIRECT is not available everywhere (tmpfs before 6.6, some overlays):
// nullptr means the case is skipped (recorded: the executable reports it).
std::unique_ptr<FileBackend> open_direct(const std::string& path, std::uint64_t size) {
    std::string error;
    auto b = FileBackend::open({path, size, true}, error);
    if (!b && error.find("O_DIRECT is not supported") != std::string::npos) {
        nbdsched::testlib::record_skip(error);
        return nullptr;
    }
    INFO(error);
    REQUIRE(b != nullptr);
    return b;
}

// The open flags of this process's descriptor on `path`: found through
// /proc/self/fd (readlink), read from /proc/self/fdinfo/N ("flags:", octal).
// -1 when no descriptor points at the file.
long open_flags_of(const std::string& path) {
    const auto want = std::filesystem::canonical(path);
    for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        if (std::filesystem::read_symlink(entry.path(), ec) != want || ec)
            continue;
        std::ifstream info("/proc/self/fdinfo/" + entry.path().filename().string());
        for (std::string key; info >> key;) {
            if (key == "flags:") {
                std::string octal;
                info >> octal;
                return std::stol(octal, nullptr, 8);
            }
        }
    }
    return -1;
}

}   // namespace

TEST_CASE("file O_DIRECT: the backend's descriptor really has O_DIRECT") {
    TempDir dir;
    auto b = open_direct(dir.file("d.img"), 1 << 20);
    if (!b)
        return;
    CHECK(b->direct());
    const long flags = open_flags_of(dir.file("d.img"));
    INFO("flags (decimal) " << flags);
    REQUIRE(flags >= 0);
    CHECK((flags & O_DIRECT) != 0);
    // The same look-up sees a buffered backend without it (the check can fail).
    std::string error;
    auto buffered = FileBackend::open({dir.file("b.img"), 1 << 20, false}, error);
    INFO(error);
    REQUIRE(buffered != nullptr);
    const long buffered_flags = open_flags_of(dir.file("b.img"));
    REQUIRE(buffered_flags >= 0);
    CHECK((buffered_flags & O_DIRECT) == 0);
}

TEST_CASE("file O_DIRECT: unaligned offsets, lengths and buffers round trip") {
    TempDir dir;
    auto b = open_direct(dir.file("d.img"), 4 << 20);
    if (!b)
        return;
    CHECK(b->direct());
    CHECK(b->describe().find("O_DIRECT") != std::string::npos);
    REQUIRE(b->write(0, byte_pattern(0, 4 << 20, 3), false) == 0);   // vector data: not 4k aligned
    struct Case {
        std::uint64_t offset;
        std::size_t length;
    };
    const Case cases[] = {{0, 4096}, {1, 1}, {4095, 2}, {512, 512}, {4000, 10000}, {8192, 4096 * 3 + 7}, {(4 << 20) - 5, 5}};
    for (const auto& c : cases) {
        auto data = byte_pattern(c.offset, c.length, 9);
        REQUIRE(b->write(c.offset, data, c.offset % 2 == 0) == 0);
        std::vector<std::byte> back(c.length + 1);
        REQUIRE(b->read(c.offset, std::span(back).subspan(1)) == 0);   // misaligned buffer
        back.erase(back.begin());
        CHECK(is_pattern(back, c.offset, 9));
    }
    // The bytes around an unaligned write keep their old contents.
    REQUIRE(b->write(70000, byte_pattern(70000, 100, 9), false) == 0);
    std::vector<std::byte> around(8192);
    REQUIRE(b->read(65536, around) == 0);
    CHECK(is_pattern({around.begin(), around.begin() + 4464}, 65536, 3));
    CHECK(is_pattern({around.begin() + 4464, around.begin() + 4564}, 70000, 9));
    CHECK(is_pattern({around.begin() + 4564, around.end()}, 70100, 3));
    REQUIRE(b->write_zeroes(1000, 5000, false, false) == 0);
    std::vector<std::byte> z(5000);
    REQUIRE(b->read(1000, z) == 0);
    CHECK(all_zero(z));
}

TEST_CASE("file O_DIRECT: concurrent unaligned writes to one block lose nothing") {
    TempDir dir;
    auto b = open_direct(dir.file("d.img"), 1 << 20);
    if (!b)
        return;
    // 8 threads each own 512-byte slices of the same 4 KiB blocks: every
    // write is a read-modify-write of a block shared with the others.
    std::vector<std::thread> pool;
    for (int t = 0; t < 8; ++t)
        pool.emplace_back([&, t] {
            for (std::uint64_t block = 0; block < 64; ++block) {
                const std::uint64_t off = block * 4096 + static_cast<std::uint64_t>(t) * 512;
                (void)b->write(off, byte_pattern(off, 512, 5), false);
            }
        });
    for (auto& th : pool)
        th.join();
    std::vector<std::byte> back(64 * 4096);
    REQUIRE(b->read(0, back) == 0);
    CHECK(is_pattern(back, 0, 5));
}

TEST_CASE("file O_DIRECT: an aligned write in flight with a read-modify-write of its block is not undone") {
    TempDir dir;
    constexpr int rounds = 200;
    auto b = open_direct(dir.file("d.img"), rounds * rmw_block);
    if (!b)
        return;
    AlignedBuffer data(rmw_block, rmw_block);
    const int undone = undone_rounds(
        *b, rounds,
        [&](std::uint64_t at) {
            const auto p = byte_pattern(at, rmw_block, 3);
            std::memcpy(data.data(), p.data(), rmw_block);
            return b->write(at, data.span(), false);
        },
        [](std::span<const std::byte> rest, std::uint64_t at) { return is_pattern(rest, at, 3); });
    MESSAGE(undone << " of " << rounds << " rounds lost the aligned write's bytes");
    CHECK(undone == 0);
}

TEST_CASE("file O_DIRECT: WRITE_ZEROES in flight with a read-modify-write of its block is not undone") {
    for (bool may_trim : {false, true}) {   // ZERO_RANGE, PUNCH_HOLE
        CAPTURE(may_trim);
        TempDir dir;
        constexpr int rounds = 200;
        auto b = open_direct(dir.file("d.img"), rounds * rmw_block);
        if (!b)
            return;
        const int undone = undone_rounds(
            *b, rounds, [&](std::uint64_t at) { return b->write_zeroes(at, rmw_block, may_trim, false); },
            [](std::span<const std::byte> rest, std::uint64_t) { return all_zero(rest); });
        MESSAGE(undone << " of " << rounds << " rounds lost the zeroes");
        CHECK(undone == 0);
    }
}

TEST_CASE("file O_DIRECT: a size that is not a multiple of the block is refused") {
    TempDir dir;
    std::string error;
    auto b = FileBackend::open({dir.file("d.img"), 4096 * 3 + 1, true}, error);
    CHECK(b == nullptr);
    MESSAGE(error);
}

TEST_CASE("file O_DIRECT: a refused size leaves an existing shorter file as it was") {
    TempDir dir;
    const std::string path = dir.file("short.img");
    std::ofstream(path) << "hello";
    std::string error;
    auto b = FileBackend::open({path, 10000, true}, error);
    if (!b && error.find("O_DIRECT is not supported") != std::string::npos) {
        nbdsched::testlib::record_skip(error);
        return;
    }
    CHECK(b == nullptr);
    CHECK(error.find("not a multiple of 4096") != std::string::npos);
    MESSAGE(error);
    CHECK(std::filesystem::file_size(path) == 5);
}
