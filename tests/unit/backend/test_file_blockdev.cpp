// The file backend on a real block device: a loop device over a temporary
// file, attached with LO_FLAGS_AUTOCLEAR so it disappears with the test
// even if the test dies. Needs root and /dev/loop-control (CI runs as
// root), else the case is reported as skipped.
#include <doctest/doctest.h>

#include <cerrno>
#include <fstream>
#include <sys/mount.h>
#include <unistd.h>

#include "backend/file_backend.hpp"
#include "case_report.hpp"
#include "loop_device.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t size = 8 << 20;

// Creates `backing` (`size` bytes) and attaches a loop device to it.
bool attach(const std::string& backing, LoopDevice& loop, std::string& why) {
    {
        std::string error;
        INFO(error);
        REQUIRE(FileBackend::open({backing, size, false}, error));
    }
    why = attach_loop(backing, loop);
    return why.empty();
}

// A ramfs mounted on a directory, detached when done (its files go with it).
struct Ramfs {
    std::string at;
    bool mounted = false;
    explicit Ramfs(std::string dir) : at(std::move(dir)) {
        mounted = ::geteuid() == 0 && ::mount("ramfs", at.c_str(), "ramfs", 0, nullptr) == 0;
    }
    ~Ramfs() {
        if (mounted)
            ::umount2(at.c_str(), MNT_DETACH);
    }
};

// /sys/block/loopN/queue/write_zeroes_max_bytes, or -1.
long long write_zeroes_max_bytes(const std::string& loop_path) {
    std::ifstream in("/sys/block/" + loop_path.substr(loop_path.rfind('/') + 1) + "/queue/write_zeroes_max_bytes");
    long long n = -1;
    in >> n;
    return n;
}

}   // namespace

TEST_CASE("FAST_ZERO on a block device without write-zeroes support is ENOTSUP and writes nothing") {
    // A loop device over a file on ramfs (no fallocate): the kernel has no
    // fast way to zero it, and its ZERO_RANGE would write the zeros.
    nbdsched::testlib::TempDir dir;
    Ramfs ram(dir.path());
    if (!ram.mounted)
        SKIP_TEST("cannot mount a ramfs (root needed)");
    LoopDevice loop;
    std::string why;
    if (!attach(dir.file("backing.img"), loop, why))
        SKIP_TEST(why);
    if (write_zeroes_max_bytes(loop.path) != 0)
        SKIP_TEST("this kernel's loop device offers write-zeroes over ramfs");
    for (bool direct : {false, true}) {
        CAPTURE(direct);
        std::string error;
        auto b = FileBackend::open({loop.path, 0, direct}, error);
        INFO(error);
        REQUIRE(b);
        REQUIRE(b->write(0, byte_pattern(0, 1 << 20, 6), false) == 0);
        CHECK(b->write_zeroes_fast(0, 1 << 20, true, false) == ENOTSUP);    // PUNCH_HOLE: unsupported
        CHECK(b->write_zeroes_fast(0, 1 << 20, false, false) == ENOTSUP);   // NO_HOLE
        std::vector<std::byte> back(1 << 20);
        REQUIRE(b->read(0, back) == 0);
        CHECK(is_pattern(back, 0, 6));
        // The ordinary WRITE_ZEROES still zeroes (by writing).
        REQUIRE(b->write_zeroes(0, 1 << 20, true, false) == 0);
        REQUIRE(b->read(0, back) == 0);
        CHECK(all_zero(back));
    }
}

TEST_CASE("file on a block device (loop): size, I/O, discard, zeroes, O_DIRECT") {
    nbdsched::testlib::TempDir dir;
    LoopDevice loop;
    std::string why;
    if (!attach(dir.file("backing.img"), loop, why))
        SKIP_TEST(why);
    std::string error;
    auto b = FileBackend::open({loop.path, 0, false}, error);
    INFO(error);
    REQUIRE(b);
    CHECK(b->is_block_device());
    CHECK(b->size() == size);
    CHECK(b->describe().rfind("block " + loop.path, 0) == 0);
    const auto rot = b->detected_rotational();
    MESSAGE(loop.path << " rotational: " << std::string(!rot ? "unknown" : *rot ? "yes"
                                                                                : "no"));
    CHECK(b->detected_rotational().has_value());

    REQUIRE(b->write(0, byte_pattern(0, size), true) == 0);
    REQUIRE(b->flush() == 0);
    REQUIRE(b->trim(4096, 1 << 20, false) == 0);   // a hint: content unspecified, must not fail
    REQUIRE(b->write_zeroes(100, 3 << 20, false, false) == 0);
    REQUIRE(b->write_zeroes(4 << 20, 1 << 20, true, true) == 0);
    std::vector<std::byte> back(size);
    REQUIRE(b->read(0, back) == 0);
    CHECK(is_pattern({back.begin(), back.begin() + 100}, 0));
    CHECK(all_zero({back.begin() + 100, back.begin() + 100 + (3 << 20)}));
    CHECK(is_pattern({back.begin() + 100 + (3 << 20), back.begin() + (4 << 20)}, 100 + (3 << 20)));
    CHECK(all_zero({back.begin() + (4 << 20), back.begin() + (5 << 20)}));
    CHECK(is_pattern({back.begin() + (5 << 20), back.end()}, 5 << 20));

    CHECK_FALSE(FileBackend::open({loop.path, size * 2, false}, error));   // larger than the device
    auto part = FileBackend::open({loop.path, size / 2, false}, error);    // a prefix is fine
    REQUIRE(part);
    CHECK(part->size() == size / 2);

    auto direct = FileBackend::open({loop.path, 0, true}, error);
    REQUIRE(direct);
    CHECK(direct->alignment() >= 512);
    REQUIRE(direct->write(1001, byte_pattern(1001, 3000, 4), false) == 0);
    std::vector<std::byte> d(3000);
    REQUIRE(direct->read(1001, d) == 0);
    CHECK(is_pattern(d, 1001, 4));
}
