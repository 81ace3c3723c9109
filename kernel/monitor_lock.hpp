// One monitor per /dev/nbdN. Two monitors of one device would both answer
// each dead link, both rewrite its record and both resize it, and a detach
// would leave the second one running; so the monitor holds a lock for as
// long as it runs, and a second one started on the same device (a manual
// `attach --device` beside the systemd unit's) exits naming the first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace nbdsched::kernel {

class MonitorLock {
public:
    // An exclusive flock(2) on `directory`/nbdN.lock that is not waited for,
    // with this process's pid written in it for the message a second monitor
    // prints. nullopt with `error` when another process holds it or the file
    // cannot be made. The lock goes with the process, however it ends.
    static std::optional<MonitorLock> take(const std::string& directory, std::uint32_t index, std::string& error);

    MonitorLock(MonitorLock&& other) noexcept;
    MonitorLock& operator=(MonitorLock&& other) noexcept;
    ~MonitorLock();

private:
    explicit MonitorLock(int fd) : fd_(fd) {}
    int fd_;
};

}   // namespace nbdsched::kernel
