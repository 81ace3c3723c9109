// Who uses /dev/nbdN or one of its partitions, so that `nbdsched detach`
// does not pull a device out from under a mounted filesystem. Read from /proc
// and /sys only: opening the device could wait on a dead connection.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace nbdsched::kernel {

// "mounted on /mnt/x", "held by dm-0", "swap": one entry for each use of the
// device or a partition of it; empty when nothing uses it.
std::vector<std::string> device_users(std::uint32_t index);

// The mount points in a /proc/self/mountinfo text whose device ("43:0",
// field 3) is one of `devices`.
std::vector<std::string> mounts_of(std::string_view mountinfo, const std::vector<std::string>& devices);

// The entries of a /proc/swaps text (its first column) that are in `paths`.
std::vector<std::string> swaps_of(std::string_view swaps, const std::vector<std::string>& paths);

}   // namespace nbdsched::kernel
