#include "kernel/monitor_lock.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace nbdsched::kernel {

namespace {

// The pid the holder wrote; empty when it cannot be read (it may be writing it).
std::string holder_pid(int fd) {
    char text[32] = {};
    auto n = ::pread(fd, text, sizeof text - 1, 0);
    std::string pid(text, n > 0 ? std::size_t(n) : 0);
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return pid;
}

}   // namespace

std::optional<MonitorLock> MonitorLock::take(const std::string& directory, std::uint32_t index, std::string& error) {
    if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
        error = directory + ": " + std::strerror(errno);
        return std::nullopt;
    }
    const auto path = directory + "/nbd" + std::to_string(index) + ".lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) {
        error = path + ": " + std::strerror(errno);
        return std::nullopt;
    }
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        const int saved = errno;
        if (saved == EWOULDBLOCK) {
            auto pid = holder_pid(fd);
            error = "/dev/nbd" + std::to_string(index) + " is watched by another monitor" +
                    (pid.empty() ? std::string() : " (pid " + pid + ")") + ", which holds " + path +
                    ": not starting a second one";
        } else {
            error = path + ": " + std::strerror(saved);
        }
        ::close(fd);
        return std::nullopt;
    }
    const auto pid = std::to_string(::getpid()) + "\n";
    bool pid_written = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) == ssize_t(pid.size());
    (void)pid_written;   // the lock holds without it; a second monitor's message just lacks the pid
    return MonitorLock(fd);
}

MonitorLock::MonitorLock(MonitorLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

MonitorLock& MonitorLock::operator=(MonitorLock&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
}

MonitorLock::~MonitorLock() {
    if (fd_ >= 0) ::close(fd_);
}

}   // namespace nbdsched::kernel
