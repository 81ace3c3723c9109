#include "loop_device.hpp"

#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace nbdsched::testlib {

LoopDevice::~LoopDevice() {
    if (fd >= 0) ::close(fd);
}

std::string attach_loop(const std::string& backing, LoopDevice& loop, bool partitions) {
    if (::geteuid() != 0) return "not root";
    const int ctl = ::open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) return "no /dev/loop-control";
    const int file = ::open(backing.c_str(), O_RDWR | O_CLOEXEC);
    bool ok = false;
    for (int attempt = 0; attempt < 10 && !ok && file >= 0; ++attempt) {   // another process may race us to a free one
        const int n = ::ioctl(ctl, LOOP_CTL_GET_FREE);
        if (n < 0) break;
        loop.path = "/dev/loop" + std::to_string(n);
        loop.fd = ::open(loop.path.c_str(), O_RDWR | O_CLOEXEC);
        if (loop.fd < 0) continue;
        loop_config config{};
        config.fd = static_cast<std::uint32_t>(file);
        config.info.lo_flags = LO_FLAGS_AUTOCLEAR | (partitions ? LO_FLAGS_PARTSCAN : 0);
        ok = ::ioctl(loop.fd, LOOP_CONFIGURE, &config) == 0;
        if (!ok) {
            ::close(loop.fd);
            loop.fd = -1;
        }
    }
    if (file >= 0) ::close(file);
    ::close(ctl);
    if (!ok) return "cannot attach a loop device";
    // Some kernels leave the scan of LOOP_CONFIGURE to later: read the table now.
    if (partitions && ::ioctl(loop.fd, BLKRRPART) != 0) return "cannot read the loop device's partition table";
    return "";
}

}   // namespace nbdsched::testlib
