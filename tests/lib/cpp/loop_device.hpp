// A loop device over a file, for tests that need a real block device:
// attached with LO_FLAGS_AUTOCLEAR, so it disappears with the test even if
// the test dies. Needs root and /dev/loop-control.
#pragma once

#include <string>

namespace nbdsched::testlib {

// An attached loop device; it goes away when `fd` is the last descriptor closed.
struct LoopDevice {
    int fd = -1;
    std::string path;   // /dev/loopN
    LoopDevice() = default;
    ~LoopDevice();
    LoopDevice(const LoopDevice&) = delete;
    LoopDevice& operator=(const LoopDevice&) = delete;
};

// Attaches a free loop device to the existing file `backing`; with
// `partitions` the kernel reads its partition table (/dev/loopNpM). Returns
// why it could not ("not root", ...), empty on success.
std::string attach_loop(const std::string& backing, LoopDevice& loop, bool partitions = false);

}   // namespace nbdsched::testlib
