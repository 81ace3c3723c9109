// A device's lock, for when its connections run on more than one event
// loop (docs/threads.md, "Connections of one device on several loops").
// Until then every handler that touches the device runs on its home loop
// and hold() takes nothing: the hot path of a device with its connections
// at home costs one predictable branch. Once a connection of the device is
// placed on another loop, share() (under EventLoops::exclusive(), so every
// loop sees it from its next handler on) makes every later hold() take the
// mutex: the scheduler, the in-flight budget, the statistics, the timers'
// arming and the backend's submissions are still touched by one thread at a
// time, whichever it is. Recursive: a holder reaches the device again
// through its callbacks (a reply's release gives back budget).
#pragma once

#include <mutex>

namespace nbdsched::daemon {

class DeviceLock {
public:
    using Hold = std::unique_lock<std::recursive_mutex>;

    Hold hold() { return shared_ ? Hold(mutex_) : Hold(); }
    // Under EventLoops::exclusive() only; never undone.
    void share() { shared_ = true; }
    bool shared() const { return shared_; }

private:
    std::recursive_mutex mutex_;
    bool shared_ = false;
};

}   // namespace nbdsched::daemon
