// Device profiles through the real daemon: what a device advertises
// (nbdinfo), data integrity through every profile (fio verify), and the
// read-ahead cache seen from a client (libnbd): coherent with writes, and
// actually used (the daemon's read-ahead line at shutdown).
#include <doctest/doctest.h>

#include <libnbd.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "case_report.hpp"
#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"
#include "tools.hpp"

using namespace nbdsched;
using namespace nbdsched::testlib;

namespace {

nlohmann::json export_info(const std::string& yaml) {
    Daemon d(profile_spec(yaml));
    auto info = nbdinfo(d.uri());
    return info.at("exports").at(0);
}

constexpr std::uint64_t kib = 1024;

// Reads [offset, offset+len) and checks every byte against pattern(seed).
void check_range(nbd_handle* h, std::uint64_t offset, std::size_t len, std::uint32_t seed) {
    auto diff = verify_pattern(h, len, offset, seed);
    REQUIRE_MESSAGE(diff.empty(), diff);
}

// "read-ahead window 2560 KiB: 12 hits, ..." from the daemon's shutdown log.
// (Plain string search: g++ 12 -O2 with ASan warns inside <regex>.)
std::uint64_t logged_hits(const std::string& log) {
    const std::string key = "read-ahead window ";
    for (auto at = log.find(key); at != std::string::npos; at = log.find(key, at + 1)) {
        const auto colon = log.find(" KiB: ", at);
        if (colon == std::string::npos) return 0;
        const char* digits = log.c_str() + colon + 6;
        char* end = nullptr;
        const auto hits = std::strtoull(digits, &end, 10);
        if (end != digits && std::string_view(end).starts_with(" hits")) return hits;
    }
    return 0;
}

}   // namespace

TEST_CASE("hdd advertises rotational, ssd/nvme/none do not; preferred block = optimal I/O size") {
    SKIP_TEST_IF(fio_skip_reason());
    auto hdd = export_info("    profile: hdd\n");
    CHECK(hdd.at("is_rotational").get<bool>());
    CHECK(hdd.at("block_size_preferred").get<int>() == 4096);   // the seed-004 disk reports none
    CHECK_FALSE(export_info("    profile: ssd\n").at("is_rotational").get<bool>());
    CHECK_FALSE(export_info("    profile: nvme\n").at("is_rotational").get<bool>());
    CHECK_FALSE(export_info("    profile: none\n").at("is_rotational").get<bool>());
    // rotational: false wins over the profile.
    CHECK_FALSE(export_info("    profile: hdd\n    rotational: false\n").at("is_rotational").get<bool>());
    auto opt = export_info("    profile: ssd\n    ssd:\n      optimal_io: 64KiB\n");
    CHECK(opt.at("block_size_preferred").get<int>() == 65536);
}

TEST_CASE("data written is read back intact through every profile (fio verify=crc32c)") {
    SKIP_TEST_IF(fio_skip_reason());
    for (const char* profile : {"none", "hdd", "ssd", "nvme"}) {
        CAPTURE(profile);
        Daemon d(profile_spec(std::string("    profile: ") + profile + "\n"));
        // Random writes of mixed sizes, each verified by reading it back;
        // a small region keeps the hdd's seeks short.
        fio(d.uri(), "--name=verify --rw=randwrite --bsrange=4k-128k --size=8M --iodepth=8 "
                     "--verify=crc32c --verify_fatal=1 --do_verify=1");
        // And sequentially (read-ahead serves these reads).
        fio(d.uri(), "--name=seqverify --rw=write --bs=64k --offset=64M --size=8M --iodepth=4 "
                     "--verify=crc32c --verify_fatal=1 --do_verify=1");
        CHECK(d.stop() == 0);
    }
}

TEST_CASE("read-ahead coherence: a write into the cached window is seen by the next read") {
    SKIP_TEST_IF(fio_skip_reason());
    Daemon d(profile_spec("    profile: hdd\n    read_ahead_kb: auto\n"));
    {
        auto h = connect(d.uri());
        REQUIRE(write_pattern(h, 8 << 20, 0, 1) == 0);
        // Sequential reads: the window (2560 KiB on hdd) is prefetched ahead.
        for (std::uint64_t off = 0; off < 1024 * kib; off += 128 * kib) check_range(h, off, 128 * kib, 1);
        // Into the window ahead of the reader, then read through it.
        REQUIRE(write_pattern(h, 16 * kib, 1024 * kib + 8 * kib, 2) == 0);
        check_range(h, 1024 * kib, 8 * kib, 1);
        check_range(h, 1024 * kib + 8 * kib, 16 * kib, 2);
        check_range(h, 1024 * kib + 24 * kib, 104 * kib, 1);
        for (std::uint64_t off = 1152 * kib; off < 3 << 20; off += 128 * kib) check_range(h, off, 128 * kib, 1);
    }
    REQUIRE(d.stop() == 0);
    CHECK(logged_hits(d.log()) > 0);
}

TEST_CASE("read-ahead coherence: a write racing a prefetch in flight") {
    SKIP_TEST_IF(fio_skip_reason());
    Daemon d(profile_spec("    profile: hdd\n    read_ahead_kb: auto\n"));
    auto h = connect(d.uri());
    REQUIRE(write_pattern(h, 8 << 20, 0, 1) == 0);
    for (int round = 0; round < 8; ++round) {
        CAPTURE(round);
        const std::uint64_t base = (round + 1) * (8ull << 20);
        REQUIRE(write_pattern(h, 4 << 20, base, 1) == 0);
        // Two sequential reads start a stream; its prefetch (tens of ms on the
        // emulated disk) is in flight when the write arrives right behind.
        std::vector<char> buf(128 * kib);
        REQUIRE(nbd_aio_pread(h, buf.data(), buf.size(), base, NBD_NULL_COMPLETION, 0) >= 0);
        REQUIRE(nbd_aio_pread(h, buf.data(), buf.size(), base + 128 * kib, NBD_NULL_COMPLETION, 0) >= 0);
        auto payload = pattern(base + 300 * kib + round * 64 * kib, 32 * kib, 3);
        REQUIRE(nbd_aio_pwrite(h, payload.data(), payload.size(), base + 300 * kib + round * 64 * kib,
                               NBD_NULL_COMPLETION, 0) >= 0);
        while (nbd_aio_in_flight(h) > 0) REQUIRE(nbd_poll(h, -1) >= 0);
        check_range(h, base + 256 * kib, 44 * kib + round * 64 * kib, 1);
        check_range(h, base + 300 * kib + round * 64 * kib, 32 * kib, 3);
        check_range(h, base + 332 * kib + round * 64 * kib, 256 * kib, 1);
    }
}

TEST_CASE("read-ahead serves sequential reads from its cache (hits in the daemon's log)") {
    SKIP_TEST_IF(fio_skip_reason());
    Daemon d(profile_spec("    profile: hdd\n"));
    fio(d.uri(), "--name=seq --rw=read --bs=128k --size=64M --iodepth=1");
    REQUIRE(d.stop() == 0);
    auto log = d.log();
    CHECK(log.find("read-ahead window 2560 KiB") != std::string::npos);
    CHECK(logged_hits(log) > 100);
}
