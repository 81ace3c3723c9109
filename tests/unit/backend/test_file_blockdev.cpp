// The file backend on a real block device: a loop device over a temporary
// file, attached with LO_FLAGS_AUTOCLEAR so it disappears with the test
// even if the test dies. Needs root and /dev/loop-control (CI runs as
// root), else the case is reported as skipped.
#include <doctest/doctest.h>

#include <cerrno>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "backend/file_backend.hpp"
#include "case_report.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t size = 8 << 20;

// An attached loop device; the device goes away when `fd` is the last
// descriptor closed (autoclear).
struct Loop {
    int fd = -1;
    std::string path;
    ~Loop() {
        if (fd >= 0)
            ::close(fd);
    }
};

bool attach(const std::string& backing, Loop& loop, std::string& why) {
    if (::geteuid() != 0) {
        why = "not root";
        return false;
    }
    const int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        why = "no /dev/loop-control";
        return false;
    }
    const int file = ::open(backing.c_str(), O_RDWR | O_CLOEXEC);
    bool ok = false;
    for (int attempt = 0; attempt < 10 && !ok; ++attempt) {   // another process may race us to a free one
        const int n = ::ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0)
            break;
        loop.path = "/dev/loop" + std::to_string(n);
        loop.fd = ::open(loop.path.c_str(), O_RDWR | O_CLOEXEC);
        if (loop.fd < 0)
            continue;
        loop_config config{};
        config.fd = static_cast<std::uint32_t>(file);
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
        ok = ::ioctl(loop.fd, LOOP_CONFIGURE, &config) == 0;
        if (!ok) {
            ::close(loop.fd);
            loop.fd = -1;
        }
    }
    ::close(file);
    ::close(ctl);
    if (!ok)
        why = "cannot attach a loop device";
    return ok;
}

}   // namespace

TEST_CASE("file on a block device (loop): size, I/O, discard, zeroes, O_DIRECT") {
    nbdsched::testlib::TempDir dir;
    const auto backing = dir.file("backing.img");
    {
        std::string error;
        REQUIRE(FileBackend::open({backing, size, false}, error));
    }
    Loop loop;
    std::string why;
    if (!attach(backing, loop, why))
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
