// What `nbdsched detach` reads to find who uses a device: the mounts of its
// device numbers in /proc/self/mountinfo and its paths in /proc/swaps.
#include <doctest/doctest.h>

#include "kernel/device_use.hpp"

using namespace nbdsched::kernel;

TEST_CASE("the mounts of a device and its partitions, by device number") {
    const char* mountinfo = "22 1 0:21 / /proc rw,nosuid - proc proc rw\n"
                            "40 25 43:0 / /mnt/data rw,relatime shared:20 - ext4 /dev/nbd0 rw\n"
                            "41 25 43:1 / /mnt/boot rw,relatime - ext4 /dev/nbd0p1 rw\n"
                            "42 25 43:32 / /mnt/other rw,relatime - ext4 /dev/nbd1 rw\n"
                            "43 25 43:0 /sub /srv/bind rw - ext4 /dev/nbd0 rw\n"
                            "44 25 43:3 / /mnt/x rw - ext4 /dev/nbd0p3 rw\n";
    auto mounts = mounts_of(mountinfo, {"43:0", "43:1"});
    REQUIRE(mounts.size() == 3);
    CHECK(mounts[0] == "/mnt/data");
    CHECK(mounts[1] == "/mnt/boot");
    CHECK(mounts[2] == "/srv/bind");   // a bind mount of it counts too
    CHECK(mounts_of(mountinfo, {"43:64"}).empty());
    CHECK(mounts_of("", {"43:0"}).empty());
}

TEST_CASE("swap on a device or a partition of it") {
    const char* swaps = "Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority\n"
                        "/dev/nbd2p1                             partition\t1048572\t\t0\t\t-2\n"
                        "/swapfile                               file\t\t1048572\t\t0\t\t-3\n";
    auto found = swaps_of(swaps, {"/dev/nbd2", "/dev/nbd2p1"});
    REQUIRE(found.size() == 1);
    CHECK(found[0] == "/dev/nbd2p1");
    CHECK(swaps_of(swaps, {"/dev/nbd20", "/dev/nbd20p1"}).empty());
}
