// FileBackend::read_if_cached: the event-loop fast path for reads the page
// cache can answer (preadv2 RWF_NOWAIT); everything else goes to the pool.
#include <doctest/doctest.h>

#include <optional>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "backend/file_backend.hpp"
#include "case_report.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

// Drops the clean cached pages of a file; true when every page of
// [offset, offset + count) is then really not resident (mincore), i.e. the
// would-block check can mean something. Retries a little: pages still under
// writeback when another test loads the machine are not dropped at once.
bool evict(const std::string& path, std::size_t length, std::size_t offset, std::size_t count) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    REQUIRE(fd >= 0);
    void* map = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
    REQUIRE(map != MAP_FAILED);
    std::vector<unsigned char> resident(length / 4096);
    bool gone = false;
    for (int attempt = 0; attempt < 50 && !gone; ++attempt) {
        if (attempt > 0) ::usleep(10000);
        ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        if (::mincore(map, length, resident.data()) != 0) break;
        gone = true;
        for (std::size_t page = offset / 4096; page < (offset + count + 4095) / 4096; ++page)
            if (resident[page] & 1) gone = false;
    }
    ::munmap(map, length);
    ::close(fd);
    return gone;
}

}   // namespace

TEST_CASE("file: read_if_cached answers cached reads, declines what would block") {
    TempDir dir;
    const auto path = dir.file("d.img");
    std::string error;
    auto b = FileBackend::open({path, 4 << 20, false}, error);
    REQUIRE(b != nullptr);
    REQUIRE(b->write(8192, byte_pattern(8192, 65536, 3), false) == 0);

    std::vector<std::byte> back(65536);
    auto hit = b->read_if_cached(8192, back);   // just written: in the page cache
    REQUIRE(hit.has_value());
    CHECK(*hit == 0);
    CHECK(is_pattern(back, 8192, 3));

    std::vector<std::byte> big(FileBackend::kCachedReadMax + 4096);
    CHECK_FALSE(b->read_if_cached(0, big).has_value());   // too long for the event loop
    std::vector<std::byte> tail(8192);
    CHECK_FALSE(b->read_if_cached((4 << 20) - 4096, tail).has_value());   // out of range: the pool says EINVAL

    REQUIRE(b->flush() == 0);   // clean pages can be dropped
    // RWF_NOWAIT starts read-ahead for the pages it does not find, and when
    // that I/O ends before the kernel looks at them again (a fast disk, the
    // host's cache, this thread preempted meanwhile on a loaded host) it
    // answers the read itself, after waiting for the disk after all (1.2 ms
    // once, beside `sync` in a loop): evicted pages, answered rightly. So:
    // evict and ask again, a little later each time, until one read declines
    // (would wait for the disk); an answer must be the data.
    std::optional<bool> declined;   // nullopt: the pages could not be evicted
    for (int attempt = 0; attempt < 30 && declined != true; ++attempt) {
        if (attempt > 0) ::usleep(20000);
        if (!evict(path, 4 << 20, 8192, back.size())) break;
        const auto again = b->read_if_cached(8192, back);
        declined = !again.has_value();
        if (again) {
            CHECK(*again == 0);
            CHECK(is_pattern(back, 8192, 3));
        }
    }
    if (declined) {
        CHECK(*declined);
        REQUIRE(b->read(8192, back) == 0);
        CHECK(is_pattern(back, 8192, 3));
    } else {
        MESSAGE("NOTE: this filesystem keeps the pages cached after POSIX_FADV_DONTNEED (tmpfs?); "
                "the would-block case is not checked here");
    }
}

TEST_CASE("file: read_if_cached is never taken with O_DIRECT") {
    TempDir dir;
    std::string error;
    FileBackend::Options o{dir.file("d.img"), 1 << 20, true};
    auto b = FileBackend::open(o, error);
    if (!b && error.find("O_DIRECT is not supported") != std::string::npos)
        SKIP_TEST(error);
    INFO(error);
    REQUIRE(b != nullptr);
    std::vector<std::byte> buf(4096);
    CHECK_FALSE(b->read_if_cached(0, buf).has_value());
}
