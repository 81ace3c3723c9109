// One monitor per device: a second take of nbdN's lock fails and names the
// holder's pid, another device's lock is its own, and the lock is free again
// once its holder is gone.
#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernel/monitor_lock.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::kernel;

TEST_CASE("a second monitor of one device is refused, naming the first") {
    nbdsched::testlib::TempDir dir;
    std::string error;
    auto first = MonitorLock::take(dir.path(), 3, error);
    REQUIRE_MESSAGE(first, error);
    auto second = MonitorLock::take(dir.path(), 3, error);
    CHECK_FALSE(second);
    CHECK(error.find("/dev/nbd3 is watched by another monitor (pid " + std::to_string(::getpid()) + ")") !=
          std::string::npos);
    error.clear();
    CHECK_MESSAGE(MonitorLock::take(dir.path(), 4, error), error);   // nbd4 is not nbd3
}

TEST_CASE("the lock is free once its monitor is gone") {
    nbdsched::testlib::TempDir dir;
    std::string error;
    {
        auto first = MonitorLock::take(dir.path(), 7, error);
        REQUIRE(first);
    }
    CHECK_MESSAGE(MonitorLock::take(dir.path(), 7, error), error);
    // ... and in a process that ends without closing it (a monitor killed):
    pid_t child = ::fork();
    if (child == 0) {
        auto held = MonitorLock::take(dir.path(), 8, error);
        ::_exit(held ? 0 : 1);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK_MESSAGE(MonitorLock::take(dir.path(), 8, error), error);
}

TEST_CASE("a lock directory that cannot be made is an error, not a lock") {
    std::string error;
    CHECK_FALSE(MonitorLock::take("/proc/self/no-such-dir", 1, error));
    CHECK(error.find("/proc/self/no-such-dir") != std::string::npos);
}
