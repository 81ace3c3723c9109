// daemon/device/io_limits: `read_ahead_kb: auto` for a device with and
// without latency to hide (a timing model or a blocking backend), and the
// preferred block size NBD_INFO_BLOCK_SIZE advertises.
#include <doctest/doctest.h>

#include "daemon/device/io_limits.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;

TEST_CASE("read_ahead auto is off on a device with no latency to hide (RAM, no profile)") {
    config::Device dev;   // read_ahead_kb: auto
    IoLimits none;
    CHECK(read_ahead_options(dev, false, none, 1 << 30, false).window_bytes == 0);
    // A timing model or a file behind it: the seed-004 rule.
    CHECK(read_ahead_options(dev, false, none, 1 << 30, true).window_bytes == 128u << 10);
    CHECK(read_ahead_options(dev, true, {1280u << 10, 0}, 1 << 30, true).window_bytes == 2560u << 10);
}

TEST_CASE("read_ahead auto is off on an RBD image, an explicit window holds there") {
    config::Device dev;
    dev.backend = config::BackendKind::rbd;
    CHECK(read_ahead_options(dev, false, {}, 1 << 30, true).window_bytes == 0);
    dev.read_ahead_kb = 256;
    CHECK(read_ahead_options(dev, false, {}, 1 << 30, true).window_bytes == 256u << 10);
}

TEST_CASE("an explicit read_ahead_kb holds on RAM too") {
    config::Device dev;
    dev.read_ahead_kb = 128;
    CHECK(read_ahead_options(dev, false, {}, 1 << 30, false).window_bytes == 128u << 10);
    dev.read_ahead_kb = 0;
    CHECK(read_ahead_options(dev, true, {}, 1 << 30, true).window_bytes == 0);
}

TEST_CASE("a window larger than half the cache beside one piece is cut; prefetches are split where the device has no max") {
    config::Device dev;
    dev.read_ahead_kb = 131072;
    dev.read_ahead_cache = 64u << 20;
    const auto o = read_ahead_options(dev, false, {}, 1 << 30, false);
    CHECK(o.window_bytes == (64u << 20) / 2 - (1280u << 10) / 2);
    CHECK(o.max_io_bytes == 1280u << 10);   // RAM and RBD report none
    CHECK(read_ahead_options(dev, true, {.max_io_bytes = 32u << 20}, 1 << 30, true).window_bytes == 16u << 20);
    dev.read_ahead_kb = std::nullopt;   // hdd with max_io 32 MiB: auto = 64 MiB, the whole cache
    CHECK(read_ahead_options(dev, true, {.max_io_bytes = 32u << 20}, 1 << 30, true).window_bytes == 16u << 20);
}

TEST_CASE("the preferred block size is a power of two in [512, max_block]") {
    CHECK(preferred_block({}, 32u << 20) == 4096);
    CHECK(preferred_block({.max_io_bytes = 1u << 20, .optimal_io_bytes = 65536}, 32u << 20) == 65536);
    CHECK(preferred_block({.max_io_bytes = 1u << 20, .optimal_io_bytes = 65536}, 16384) == 4096);
    CHECK(preferred_block({}, 1024) == 1024);   // max_request_bytes: 1KiB
    CHECK(preferred_block({}, 3000) == 2048);
    CHECK(preferred_block({}, 512) == 512);
}
