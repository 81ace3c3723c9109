#include "backend/sysfs_queue.hpp"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <sys/stat.h>
#include <sys/sysmacros.h>

namespace nbdsched::backend {

namespace fs = std::filesystem;

namespace {

std::optional<std::uint64_t> read_number(const fs::path& file) {
    std::ifstream in(file);
    std::uint64_t value = 0;
    if (in >> value)
        return value;
    return std::nullopt;
}

// The directory holding queue/: the device itself, or for a partition its
// parent disk (partitions have a "partition" file and no queue/).
std::optional<fs::path> disk_dir(unsigned major, unsigned minor) {
    std::error_code ec;
    const fs::path link = "/sys/dev/block/" + std::to_string(major) + ":" + std::to_string(minor);
    fs::path dir = fs::canonical(link, ec);
    if (ec)
        return std::nullopt;
    if (!fs::exists(dir / "queue", ec) && fs::exists(dir / "partition", ec))
        dir = dir.parent_path();
    if (!fs::exists(dir / "queue", ec))
        return std::nullopt;
    return dir;
}

struct MountSource {
    std::string fstype;
    std::string source;
};

// The mount whose st_dev is major:minor, from /proc/self/mountinfo:
// "36 35 0:31 / /mnt rw - btrfs /dev/sda2 rw".
std::optional<MountSource> mount_of(unsigned major, unsigned minor) {
    std::ifstream in("/proc/self/mountinfo");
    const std::string wanted = std::to_string(major) + ":" + std::to_string(minor);
    std::string line;
    std::optional<MountSource> found;
    while (std::getline(in, line)) {
        std::istringstream fields(line);
        std::string id, parent, devno;
        fields >> id >> parent >> devno;
        if (devno != wanted)
            continue;
        const auto dash = line.find(" - ");
        if (dash == std::string::npos)
            continue;
        std::istringstream tail(line.substr(dash + 3));
        MountSource m;
        tail >> m.fstype >> m.source;
        found = m;   // the last match is the one on top
    }
    return found;
}

}   // namespace

std::optional<QueueInfo> queue_info_for_device(unsigned major, unsigned minor) {
    auto dir = disk_dir(major, minor);
    if (!dir)
        return std::nullopt;
    QueueInfo info;
    info.sysfs_dir = dir->string();
    const fs::path q = *dir / "queue";
    if (auto r = read_number(q / "rotational"))
        info.rotational = *r != 0;
    if (auto kb = read_number(q / "max_sectors_kb"))
        info.max_io_bytes = static_cast<std::uint32_t>(*kb * 1024);
    if (auto opt = read_number(q / "optimal_io_size"))
        info.optimal_io_bytes = static_cast<std::uint32_t>(*opt);
    if (auto lbs = read_number(q / "logical_block_size"))
        info.logical_block_size = static_cast<std::uint32_t>(*lbs);
    if (auto wz = read_number(q / "write_zeroes_max_bytes"))
        info.write_zeroes = *wz != 0;
    return info;
}

std::optional<QueueInfo> queue_info_for_path(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0)
        return std::nullopt;
    const dev_t dev = S_ISBLK(st.st_mode) ? st.st_rdev : st.st_dev;
    if (auto info = queue_info_for_device(::major(dev), ::minor(dev)))
        return info;
    if (S_ISBLK(st.st_mode))
        return std::nullopt;
    // An anonymous device number (btrfs, overlay, tmpfs, NFS...): ask the
    // mount table what is mounted there.
    auto mount = mount_of(::major(dev), ::minor(dev));
    if (!mount)
        return std::nullopt;
    if (mount->fstype == "tmpfs" || mount->fstype == "ramfs") {
        QueueInfo memory;
        memory.rotational = false;
        return memory;
    }
    struct stat src {};
    if (mount->source.rfind("/dev/", 0) == 0 && ::stat(mount->source.c_str(), &src) == 0 && S_ISBLK(src.st_mode))
        return queue_info_for_device(::major(src.st_rdev), ::minor(src.st_rdev));
    return std::nullopt;   // overlay, network filesystems, ...: cannot tell
}

std::optional<bool> detect_rotational(const std::string& path) {
    auto info = queue_info_for_path(path);
    return info ? info->rotational : std::nullopt;
}

}   // namespace nbdsched::backend
