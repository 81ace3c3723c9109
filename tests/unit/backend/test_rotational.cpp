#include <doctest/doctest.h>

#include <cstdio>
#include <linux/magic.h>
#include <sys/vfs.h>

#include "backend/file_backend.hpp"
#include "backend/sysfs_queue.hpp"
#include "case_report.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;

namespace {
const char* show(std::optional<bool> r) {
    return !r ? "unknown" : *r ? "rotational"
                               : "non-rotational";
}
}   // namespace

TEST_CASE("rotational: detection for the filesystem holding the temp dir (printed)") {
    nbdsched::testlib::TempDir dir;
    auto info = queue_info_for_path(dir.path());
    std::printf("rotational for %s: %s", dir.path().c_str(), show(info ? info->rotational : std::nullopt));
    if (info)
        std::printf(" (sysfs %s, max_io %u, optimal_io %u, logical block %u)", info->sysfs_dir.c_str(),
                    info->max_io_bytes, info->optimal_io_bytes, info->logical_block_size);
    std::printf("\n");
    CHECK(detect_rotational(dir.path()) == (info ? info->rotational : std::nullopt));
    if (info && !info->sysfs_dir.empty()) {
        CHECK(info->rotational.has_value());
        CHECK(info->logical_block_size >= 512);
        CHECK(info->max_io_bytes >= 4096);
    }
    std::string error;
    auto b = FileBackend::open({dir.file("d.img"), 1 << 20, false}, error);
    REQUIRE(b != nullptr);
    CHECK(b->detected_rotational() == (info ? info->rotational : std::nullopt));
}

TEST_CASE("rotational: a missing path is unknown, /proc is unknown") {
    CHECK_FALSE(queue_info_for_path("/no/such/path").has_value());
    CHECK_FALSE(detect_rotational("/proc/self/status").has_value());
}

TEST_CASE("rotational: a file on tmpfs is memory: non-rotational (found through the mount table)") {
    struct statfs fs {};
    if (::statfs("/dev/shm", &fs) != 0 || fs.f_type != TMPFS_MAGIC)
        SKIP_TEST("/dev/shm is not tmpfs here");
    auto info = queue_info_for_path("/dev/shm");
    REQUIRE(info);
    CHECK(info->rotational == false);
    CHECK(info->sysfs_dir.empty());
}

TEST_CASE("rotational: block devices listed in sysfs report their own queue") {
    // Every /sys/block entry with a queue must resolve by device number.
    auto info = queue_info_for_device(7, 0);   // loop0, present on most systems
    if (!info)
        SKIP_TEST("no loop0 in sysfs");
    CHECK(info->sysfs_dir.find("loop0") != std::string::npos);
    CHECK(info->rotational.has_value());
}
