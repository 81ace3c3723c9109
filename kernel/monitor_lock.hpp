// One monitor per /dev/nbdN. Two monitors of one device would both answer
// each dead link, both rewrite its record and both resize it, and a detach
// would leave the second one running; so the monitor holds a lock for as
// long as it runs, and a second one started on the same device (a manual
// `attach --device` beside the systemd unit's) exits naming the first, or,
// asked to wait (the unit's monitor), waits for the first to end and then
// takes the device over: a unit that exited instead would be restarted by
// systemd every few seconds, logging the same refusal each time.
#pragma once

#include <cstdint>
#include <functional>
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
    // The same lock, waited for while another process holds it: `waiting` is
    // called once, with who holds it, before the wait. nullopt with `error`
    // only when the file cannot be made or locked (or, with an empty
    // `waiting`, when it is held: take()).
    static std::optional<MonitorLock> take_waiting(const std::string& directory, std::uint32_t index,
                                                   const std::function<void(const std::string&)>& waiting,
                                                   std::string& error);

    MonitorLock(MonitorLock&& other) noexcept;
    MonitorLock& operator=(MonitorLock&& other) noexcept;
    ~MonitorLock();

private:
    explicit MonitorLock(int fd) : fd_(fd) {}
    int fd_;
};

}   // namespace nbdsched::kernel
