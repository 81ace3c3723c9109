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

// The lock file of nbdN, made if need be; -1 with `error`.
int open_lock_file(const std::string& directory, std::uint32_t index, std::string& path, std::string& error) {
    if (::mkdir(directory.c_str(), 0755) != 0 && errno != EEXIST) {
        error = directory + ": " + std::strerror(errno);
        return -1;
    }
    path = directory + "/nbd" + std::to_string(index) + ".lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) error = path + ": " + std::strerror(errno);
    return fd;
}

std::string held_message(int fd, std::uint32_t index, const std::string& path) {
    auto pid = holder_pid(fd);
    return "/dev/nbd" + std::to_string(index) + " is watched by another monitor" +
           (pid.empty() ? std::string() : " (pid " + pid + ")") + ", which holds " + path;
}

// Writes this process's pid into the lock it now holds.
void write_pid(int fd) {
    const auto pid = std::to_string(::getpid()) + "\n";
    bool pid_written = ::ftruncate(fd, 0) == 0 && ::pwrite(fd, pid.data(), pid.size(), 0) == ssize_t(pid.size());
    (void)pid_written;   // the lock holds without it; a second monitor's message just lacks the pid
}

}   // namespace

std::optional<MonitorLock> MonitorLock::take(const std::string& directory, std::uint32_t index, std::string& error) {
    return take_waiting(directory, index, nullptr, error);
}

// Without `waiting`, a lock held elsewhere is an error instead of a wait.
std::optional<MonitorLock> MonitorLock::take_waiting(const std::string& directory, std::uint32_t index,
                                                     const std::function<void(const std::string&)>& waiting,
                                                     std::string& error) {
    std::string path;
    int fd = open_lock_file(directory, index, path, error);
    if (fd < 0) return std::nullopt;
    int rc = ::flock(fd, LOCK_EX | LOCK_NB);
    if (rc != 0 && errno == EWOULDBLOCK) {
        if (!waiting) {
            error = held_message(fd, index, path) + ": not starting a second one";
            ::close(fd);
            return std::nullopt;
        }
        waiting(held_message(fd, index, path));
        while ((rc = ::flock(fd, LOCK_EX)) != 0 && errno == EINTR) {
        }
    }
    if (rc != 0) {
        error = path + ": " + std::strerror(errno);
        ::close(fd);
        return std::nullopt;
    }
    write_pid(fd);
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
