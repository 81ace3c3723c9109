// What sysfs says about the block device under a path: the device itself for
// a block special file, the device holding the filesystem for a regular file.
// Best effort: partitions are walked up to their disk, filesystems on an
// anonymous device (btrfs, overlay, ...) are looked up through the mount
// table, tmpfs/ramfs count as non-rotational memory; anything else unknown.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace nbdsched::backend {

struct QueueInfo {
    std::string sysfs_dir;                  // e.g. "/sys/devices/.../block/vda"; empty for memory filesystems
    std::optional<bool> rotational;         // queue/rotational
    std::uint32_t max_io_bytes = 0;         // queue/max_sectors_kb * 1024; 0 = unknown
    std::uint32_t optimal_io_bytes = 0;     // queue/optimal_io_size; 0 = none reported
    std::uint32_t logical_block_size = 0;   // queue/logical_block_size; 0 = unknown
    std::optional<bool> write_zeroes;       // queue/write_zeroes_max_bytes != 0: zeroing without writing
};

// nullopt when the path does not exist or nothing could be found.
std::optional<QueueInfo> queue_info_for_path(const std::string& path);

// The same for a device number (major:minor), e.g. st_rdev of a block device.
std::optional<QueueInfo> queue_info_for_device(unsigned major, unsigned minor);

// Shorthand: queue_info_for_path(path)->rotational, nullopt when unknown.
std::optional<bool> detect_rotational(const std::string& path);

}   // namespace nbdsched::backend
