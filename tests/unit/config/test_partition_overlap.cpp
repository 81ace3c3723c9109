// Two file devices over a partition and its whole disk overlap: a loop
// device over a file with one partition in its table (/dev/loopN and
// /dev/loopNp1). Needs root and /dev/loop-control, else skipped.
#include "helpers.hpp"

#include <chrono>
#include <cstdint>
#include <fstream>
#include <linux/blkpg.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <thread>
#include <vector>

#include "case_report.hpp"
#include "loop_device.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::config::test;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint32_t first_sector = 2048;
constexpr std::uint32_t sectors = 8192;

// An 8 MiB file whose MBR has one Linux partition.
void write_disk_image(const std::string& path) {
    std::vector<char> image(8u << 20, 0);
    const auto put_u32 = [&](std::size_t at, std::uint32_t v) {
        for (int i = 0; i < 4; ++i) image[at + i] = static_cast<char>(v >> (8 * i));
    };
    image[446 + 4] = static_cast<char>(0x83);   // partition 1's type: Linux
    put_u32(446 + 8, first_sector);
    put_u32(446 + 12, sectors);
    image[510] = static_cast<char>(0x55);
    image[511] = static_cast<char>(0xaa);
    std::ofstream(path, std::ios::binary).write(image.data(), static_cast<std::streamsize>(image.size()));
}

// A kernel without the MBR parser finds no partition in the table: add it
// as partx -a does (EBUSY when the kernel found it).
void add_partition(int fd) {
    blkpg_partition part{};
    part.start = static_cast<long long>(first_sector) * 512;
    part.length = static_cast<long long>(sectors) * 512;
    part.pno = 1;
    blkpg_ioctl_arg arg{};
    arg.op = BLKPG_ADD_PARTITION;
    arg.datalen = sizeof part;
    arg.data = &part;
    ::ioctl(fd, BLKPG, &arg);
}

bool is_block_device(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
}

nbdsched::config::LoadResult two(const std::string& a, const std::string& b) {
    return load("devices:\n  - {name: sa, backend: file, path: " + a + "}\n  - {name: sb, backend: file, path: " + b +
                "}\nexports: [{name: e0, device: sa}, {name: e1, device: sb}]\n");
}

}   // namespace

TEST_CASE("a partition and its whole disk are refused as two devices, either way round") {
    TempDir dir;
    write_disk_image(dir.file("disk.img"));
    LoopDevice loop;
    SKIP_TEST_IF(attach_loop(dir.file("disk.img"), loop, true));
    add_partition(loop.fd);
    const std::string partition = loop.path + "p1";
    for (int i = 0; i < 200 && !is_block_device(partition); ++i)   // devtmpfs makes the node
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!is_block_device(partition)) SKIP_TEST("no " + partition + " appeared");

    auto r = two(loop.path, partition);
    expect_error(r, "devices[1].path", 3, 37,
                 "device sb is over a partition of the disk that device sa is over (path " + loop.path + ", line 2)");
    r = two(partition, loop.path);
    expect_error(r, "devices[1].path", 3, 37,
                 "device sb is over the whole disk of the partition that device sa is over (path " + partition);
    // The same partition twice is still one block device.
    expect_error(two(partition, partition), "devices[1].path", 3, 37, "is over the same block device as device sa");
}
