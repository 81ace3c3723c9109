// One monitor per device: a second take of nbdN's lock fails and names the
// holder's pid, another device's lock is its own, and the lock is free again
// once its holder is gone; a monitor asked to wait gets it when the holder ends.
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

TEST_CASE("a waiting monitor is told who holds the device, then gets it once the holder ends") {
    nbdsched::testlib::TempDir dir;
    int ready[2], release[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(release) == 0);
    pid_t holder = ::fork();
    if (holder == 0) {
        std::string child_error;
        auto held = MonitorLock::take(dir.path(), 5, child_error);
        char c = held ? 'y' : 'n';
        (void)!::write(ready[1], &c, 1);
        (void)!::read(release[0], &c, 1);   // held until the parent says so
        ::_exit(0);
    }
    char c = 0;
    REQUIRE(::read(ready[0], &c, 1) == 1);
    REQUIRE(c == 'y');
    std::string error, told;
    int calls = 0;
    auto waiting = [&](const std::string& holder_text) {
        ++calls;
        told = holder_text;
        (void)!::write(release[1], "x", 1);   // the holder ends while we wait
    };
    auto lock = MonitorLock::take_waiting(dir.path(), 5, waiting, error);
    CHECK_MESSAGE(lock, error);
    CHECK(calls == 1);
    CHECK(told.find("/dev/nbd5 is watched by another monitor (pid " + std::to_string(holder) + ")") !=
          std::string::npos);
    int status = 0;
    REQUIRE(::waitpid(holder, &status, 0) == holder);
    // Now held here: a third monitor is refused, naming this process.
    CHECK_FALSE(MonitorLock::take(dir.path(), 5, error));
    CHECK(error.find("(pid " + std::to_string(::getpid()) + ")") != std::string::npos);
    // A free lock is taken without a wait.
    calls = 0;
    CHECK(MonitorLock::take_waiting(dir.path(), 6, waiting, error));
    CHECK(calls == 0);
}
