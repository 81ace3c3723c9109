#include <doctest/doctest.h>

#include <cerrno>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

#include "backend/file_backend.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

std::unique_ptr<FileBackend> open_ok(const FileBackend::Options& o) {
    std::string error;
    auto b = FileBackend::open(o, error);
    INFO(error);
    REQUIRE(b != nullptr);
    CHECK(error.empty());
    return b;
}

std::uint64_t allocated_on_disk(const std::string& path) {
    struct stat st {};
    REQUIRE(::stat(path.c_str(), &st) == 0);
    return static_cast<std::uint64_t>(st.st_blocks) * 512;
}

}   // namespace

TEST_CASE("file: created sparse with the configured size, reopened with size 0") {
    TempDir dir;
    const auto path = dir.file("d.img");
    {
        auto b = open_ok({path, 8 << 20, false});
        CHECK(b->created());
        CHECK(b->size() == 8 << 20);
        CHECK(b->blocking());
        CHECK_FALSE(b->is_block_device());
        CHECK(b->describe().find(path) != std::string::npos);
        CHECK(std::filesystem::file_size(path) == 8 << 20);
        CHECK(allocated_on_disk(path) < (1 << 20));
        REQUIRE(b->write(4096, byte_pattern(4096, 8192), false) == 0);
    }
    auto b = open_ok({path, 0, false});
    CHECK_FALSE(b->created());
    CHECK(b->size() == 8 << 20);
    std::vector<std::byte> back(8192);
    REQUIRE(b->read(4096, back) == 0);
    CHECK(is_pattern(back, 4096));
}

TEST_CASE("file: size mismatch: smaller file grows, larger file is refused") {
    TempDir dir;
    const auto path = dir.file("d.img");
    { std::ofstream(path) << "hello"; }
    {
        auto b = open_ok({path, 1 << 20, false});
        CHECK(b->grown());
        CHECK(std::filesystem::file_size(path) == 1 << 20);
        std::vector<std::byte> head(5);
        REQUIRE(b->read(0, head) == 0);
        CHECK(std::string(reinterpret_cast<char*>(head.data()), 5) == "hello");
    }
    std::string error;
    CHECK(FileBackend::open({path, 4096, false}, error) == nullptr);
    CHECK(error.find("larger than the configured size") != std::string::npos);
    MESSAGE(error);
}

TEST_CASE("file: a failed start's undo_open shrinks a grown file back and removes a created one, never data") {
    TempDir dir;
    const auto grown = dir.file("grown.img");
    const auto created = dir.file("created.img");
    { std::ofstream(grown) << std::string(4096, 'x'); }
    {
        auto b = open_ok({grown, 1 << 20, false});
        auto c = open_ok({created, 1 << 20, false});
        REQUIRE(b->write(0, byte_pattern(0, 4096), false) == 0);   // below the old end: still undone
        CHECK(b->undo_open().find("shrunk back to 4KiB") != std::string::npos);
        CHECK(c->undo_open().find("removed") != std::string::npos);
        CHECK(b->undo_open().empty());   // once
    }
    CHECK(std::filesystem::file_size(grown) == 4096);
    CHECK_FALSE(std::filesystem::exists(created));
    std::vector<std::byte> head(4096);
    REQUIRE(open_ok({grown, 0, false})->read(0, head) == 0);
    CHECK(is_pattern(head, 0));

    // Data past the old end (or anywhere in a created file): left as it is.
    {
        auto b = open_ok({grown, 1 << 20, false});
        auto c = open_ok({created, 1 << 20, false});
        REQUIRE(b->write(512 << 10, byte_pattern(0, 4096), false) == 0);
        REQUIRE(c->write(0, byte_pattern(0, 4096), false) == 0);
        const auto kept = b->undo_open();
        MESSAGE(kept);
        CHECK(kept.find("left at 1MiB (data was written past 4KiB") != std::string::npos);
        CHECK(c->undo_open().find("left at 1MiB") != std::string::npos);
    }
    CHECK(std::filesystem::file_size(grown) == 1 << 20);
    CHECK(std::filesystem::file_size(created) == 1 << 20);
}

TEST_CASE("file: a reload measures a file whose size is not configured again") {
    TempDir dir;
    const auto path = dir.file("d.img");
    open_ok({path, 8 << 20, false});   // creates it
    auto measured = open_ok({path, 0, false});
    auto configured = open_ok({path, 8 << 20, false});
    std::filesystem::resize_file(path, 12 << 20);
    CHECK(measured->refresh_size() == 0);
    CHECK(measured->size() == 12 << 20);
    CHECK(measured->write(11 << 20, byte_pattern(11 << 20, 4096), false) == 0);   // the new tail
    CHECK(configured->refresh_size() == 0);
    CHECK(configured->size() == 8 << 20);   // a configured size stays
    std::filesystem::resize_file(path, 4 << 20);
    CHECK(measured->refresh_size() == 0);
    CHECK(measured->size() == 4 << 20);
    std::vector<std::byte> out(4096);
    CHECK(measured->read(6 << 20, out) == EINVAL);   // past the new end: refused, not served as zeros
    CHECK(measured->read(0, out) == 0);
    std::filesystem::resize_file(path, 0);
    CHECK(measured->refresh_size() == EINVAL);   // emptied: the old bound stays
    CHECK(measured->size() == 4 << 20);
}

TEST_CASE("file: bad paths are errors with a message") {
    TempDir dir;
    std::string error;
    CHECK(FileBackend::open({dir.file("no/such/dir/x.img"), 4096, false}, error) == nullptr);
    CHECK(error.find("No such file") != std::string::npos);
    error.clear();
    CHECK(FileBackend::open({dir.file("missing.img"), 0, false}, error) == nullptr);
    CHECK(error.find("no size") != std::string::npos);
    error.clear();
    CHECK(FileBackend::open({dir.path(), 0, false}, error) == nullptr);   // a directory
    CHECK_FALSE(error.empty());
    error.clear();
    { std::ofstream(dir.file("empty.img")); }
    CHECK(FileBackend::open({dir.file("empty.img"), 0, false}, error) == nullptr);
    CHECK(error.find("empty") != std::string::npos);
    CHECK_FALSE(std::filesystem::exists(dir.file("missing.img")));
}

TEST_CASE("file: read/write patterns, flush, fua, out of range") {
    TempDir dir;
    auto b = open_ok({dir.file("d.img"), 4 << 20, false});
    const std::uint64_t offs[] = {0, 1, 511, 4095, 4097, (4 << 20) - 70000};
    for (auto off : offs) {
        REQUIRE(b->write(off, byte_pattern(off, 65537, 7), off % 2 == 1) == 0);
        std::vector<std::byte> back(65537);
        REQUIRE(b->read(off, back) == 0);
        CHECK(is_pattern(back, off, 7));
    }
    CHECK(b->flush() == 0);
    std::vector<std::byte> buf(10);
    CHECK(b->read((4 << 20) - 5, buf) == EINVAL);
    CHECK(b->write(4 << 20, buf, false) == EINVAL);
    CHECK(b->trim(0, (4 << 20) + 1, false) == EINVAL);
}

TEST_CASE("file: trim punches holes that read as zeros") {
    TempDir dir;
    const auto path = dir.file("d.img");
    auto b = open_ok({path, 4 << 20, false});
    REQUIRE(b->write(0, byte_pattern(0, 4 << 20), false) == 0);
    REQUIRE(b->flush() == 0);
    const auto before = allocated_on_disk(path);
    REQUIRE(b->trim(1 << 20, 2 << 20, true) == 0);
    std::vector<std::byte> back(2 << 20);
    REQUIRE(b->read(1 << 20, back) == 0);
    CHECK(all_zero(back));
    CHECK(allocated_on_disk(path) <= before - (2 << 20));
    std::vector<std::byte> edge(4096);
    REQUIRE(b->read((1 << 20) - 4096, edge) == 0);
    CHECK(is_pattern(edge, (1 << 20) - 4096));
}

TEST_CASE("file: write_zeroes with and without may_trim") {
    TempDir dir;
    const auto path = dir.file("d.img");
    auto b = open_ok({path, 4 << 20, false});
    REQUIRE(b->write(0, byte_pattern(0, 4 << 20), false) == 0);
    REQUIRE(b->flush() == 0);
    const auto full = allocated_on_disk(path);

    REQUIRE(b->write_zeroes(100, 1 << 20, false, false) == 0);   // NO_HOLE: stays allocated
    std::vector<std::byte> back((1 << 20) + 200);
    REQUIRE(b->read(0, back) == 0);
    CHECK(is_pattern({back.begin(), back.begin() + 100}, 0));
    CHECK(all_zero({back.begin() + 100, back.begin() + 100 + (1 << 20)}));
    CHECK(is_pattern({back.begin() + 100 + (1 << 20), back.end()}, 100 + (1 << 20)));
    CHECK(allocated_on_disk(path) >= full - (64 << 10));

    REQUIRE(b->write_zeroes(2 << 20, 1 << 20, true, true) == 0);   // may punch
    std::vector<std::byte> z(1 << 20);
    REQUIRE(b->read(2 << 20, z) == 0);
    CHECK(all_zero(z));
    CHECK(allocated_on_disk(path) <= full - (1 << 20) + (64 << 10));   // some metadata may move
}
