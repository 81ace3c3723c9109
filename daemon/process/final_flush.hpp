// The flush of every device when the daemon stops, bounded in time. A
// device whose storage does not answer (the Ceph cluster gone, a hung
// mount) would otherwise keep the process from ever exiting: rbd_flush and
// fsync wait as long as the storage does. Each device flushes on a thread
// of its own; a flush still running at the deadline is left behind, and the
// caller must then exit without closing the devices (closing waits for the
// same storage). Nothing promised is lost by that: NBD promises only the
// writes acknowledged before a completed FLUSH, or with FUA, and those are
// on the storage already.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "daemon/device/device.hpp"

namespace nbdsched::daemon {

struct FinalFlush {
    struct Failure {
        std::string device;
        int error;   // errno
    };
    std::vector<Failure> failed;           // one per flush that failed
    std::vector<std::string> unfinished;   // devices still flushing at the deadline
};

FinalFlush flush_devices(const std::vector<std::unique_ptr<Device>>& devices, std::chrono::milliseconds deadline);

}   // namespace nbdsched::daemon
