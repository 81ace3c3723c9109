// The file backend's two I/O engines side by side in one daemon: io_uring
// (O_DIRECT and buffered) and the thread pool. 64 requests in flight on one
// connection mix what the ring takes (aligned reads and writes, FUA, FLUSH)
// with what it leaves to the pool (unaligned O_DIRECT, TRIM, WRITE_ZEROES);
// everything reads back, and the data is in the file after FLUSH. An
// O_DIRECT read-modify-write does not undo a write of its block in flight
// beside it. Also run under ThreadSanitizer (the ring on the loop, the pool
// beside it).
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_size = 16ull << 20;

ServerSpec engines_spec() {
    ServerSpec s;
    s.tcp = false;
    // auto, not io_uring: where the kernel refuses a ring these run on the
    // threads (io_engine: io_uring would not start; test_io_uring_refused.py).
    for (auto [name, yaml] : {std::pair{"ud", "    direct: true\n    io_engine: auto\n"},
                              std::pair{"ub", "    io_engine: auto\n"},
                              std::pair{"td", "    direct: true\n    io_engine: threads\n"}}) {
        auto d = device(name, "file", k_size);
        d.yaml = yaml;
        s.devices.push_back(d);
        s.exports.push_back(export_of(name, name));
    }
    return s;
}

bool drain(nbd_handle* h) {
    while (nbd_aio_in_flight(h) > 0)
        if (nbd_poll(h, -1) == -1) return false;
    return true;
}

std::vector<std::uint8_t> read_file(const std::string& path, std::uint64_t offset, std::size_t len) {
    std::ifstream f(path, std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    std::vector<std::uint8_t> out(len);
    f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(len));
    return out;
}

// Request i: aligned 4 KiB..64 KiB writes, and every third one unaligned
// (offset + 7, an odd length), each in its own 128 KiB slot.
std::uint64_t offset_of(int i) { return std::uint64_t(i) * 128 * 1024 + (i % 3 == 0 ? 7 : 0); }
std::size_t length_of(int i) { return i % 3 == 0 ? 5000 + i : 4096 * (1 + i % 16); }

void exercise(Daemon& d, const std::string& name) {
    CAPTURE(name);
    Nbd h = connect(d.uri(name));
    constexpr int n = 64;
    const std::uint32_t seed = name[0] * 100 + name[1];
    std::vector<std::vector<std::uint8_t>> out;
    for (int i = 0; i < n; ++i) {
        out.push_back(pattern(offset_of(i), length_of(i), seed + i));
        const std::uint32_t flags = i % 4 == 1 ? LIBNBD_CMD_FLAG_FUA : 0;
        REQUIRE_MESSAGE(nbd_aio_pwrite(h, out.back().data(), out.back().size(), offset_of(i), NBD_NULL_COMPLETION,
                                       flags) > 0,
                        nbd_error());
        if (i % 16 == 15) REQUIRE(nbd_aio_flush(h, NBD_NULL_COMPLETION, 0) > 0);
    }
    REQUIRE_MESSAGE(drain(h), nbd_error());
    REQUIRE_MESSAGE(nbd_flush(h, 0) == 0, nbd_error());
    // After FLUSH the bytes are in the file itself.
    CHECK((read_file(d.device_path(name), offset_of(4), length_of(4)) == out[4]));
    CHECK((read_file(d.device_path(name), offset_of(3), length_of(3)) == out[3]));

    // Reads of all of it, 64 at a time, with a TRIM and a WRITE_ZEROES among them.
    std::vector<std::vector<std::uint8_t>> in(n);
    for (int i = 0; i < n; ++i) {
        in[i].resize(length_of(i));
        REQUIRE(nbd_aio_pread(h, in[i].data(), in[i].size(), offset_of(i), NBD_NULL_COMPLETION, 0) > 0);
        // Beyond the 64 slots (8 MiB); the zeroed range is unaligned.
        if (i == 20) REQUIRE(nbd_aio_trim(h, 2 << 20, 9ull << 20, NBD_NULL_COMPLETION, 0) > 0);
        if (i == 40) REQUIRE(nbd_aio_zero(h, 5000, (12ull << 20) + 7, NBD_NULL_COMPLETION, LIBNBD_CMD_FLAG_FUA) > 0);
    }
    REQUIRE_MESSAGE(drain(h), nbd_error());
    for (int i = 0; i < n; ++i) {
        CAPTURE(i);
        CHECK((in[i] == out[i]));
    }
    CHECK(reads_zero(h, 2 << 20, 9ull << 20));
    CHECK(reads_zero(h, 5000, (12ull << 20) + 7));
    CHECK(verify_pattern(h, length_of(60), offset_of(60), seed + 60) == "");
    // The device's last block.
    REQUIRE(write_pattern(h, 4096, k_size - 4096, 9, LIBNBD_CMD_FLAG_FUA) == 0);
    CHECK(verify_pattern(h, 4096, k_size - 4096, 9) == "");
}

// Rounds in which an aligned WRITE (or a NO_HOLE WRITE_ZEROES) of a 4 KiB
// block, in flight with an unaligned WRITE of its first 100 bytes, had its
// other bytes read back as the block's old ones: the O_DIRECT
// read-modify-write of the small write put them back.
int undone_rounds(Daemon& d, const std::string& name, int rounds, bool zero) {
    Nbd h = connect(d.uri(name));
    const std::vector<std::uint8_t> old(4096, 0x11), head(100, 0x22), whole(4096, 0x33);
    const std::vector<std::uint8_t> expected(4096 - 100, zero ? 0 : 0x33);
    int undone = 0;
    for (int i = 0; i < rounds; ++i) {
        const std::uint64_t at = std::uint64_t(i % 64) * 3 * 4096 + (1 << 20);
        REQUIRE(nbd_pwrite(h, old.data(), old.size(), at, 0) == 0);
        REQUIRE(nbd_aio_pwrite(h, head.data(), head.size(), at, NBD_NULL_COMPLETION, 0) > 0);
        if (zero)
            REQUIRE(nbd_aio_zero(h, 4096, at, NBD_NULL_COMPLETION, LIBNBD_CMD_FLAG_NO_HOLE) > 0);
        else
            REQUIRE(nbd_aio_pwrite(h, whole.data(), whole.size(), at, NBD_NULL_COMPLETION, 0) > 0);
        REQUIRE_MESSAGE(drain(h), nbd_error());
        std::vector<std::uint8_t> rest(4096 - 100);
        REQUIRE(nbd_pread(h, rest.data(), rest.size(), at + 100, 0) == 0);
        if (rest != expected) ++undone;
    }
    return undone;
}

}   // namespace

TEST_CASE("O_DIRECT file devices: a WRITE or WRITE_ZEROES in flight with an unaligned WRITE of its block stays") {
    Daemon d(engines_spec());
    for (const char* name : {"ud", "td"}) {
        for (bool zero : {false, true}) {
            CAPTURE(name);
            CAPTURE(zero);
            const int undone = undone_rounds(d, name, 300, zero);
            const std::string what = std::string(name) + (zero ? " WRITE_ZEROES" : " WRITE");
            MESSAGE(what << ": " << undone << " of 300 rounds undone");
            CHECK(undone == 0);
        }
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("io_uring and thread-pool file devices: mixed requests in flight, durable after FLUSH") {
    Daemon d(engines_spec());
    const std::string log = d.log();
    const bool ring = log.find("io_uring unavailable") == std::string::npos;
    if (ring) {
        CHECK(log.find("device ud: file") != std::string::npos);
        CHECK(log.find("(O_DIRECT) (io_uring)") != std::string::npos);
        CHECK(log.find(d.device_path("ub") + " 16MiB (io_uring)") != std::string::npos);
    } else {
        MESSAGE("no io_uring here: the ud and ub devices ran on the threads");
    }
    CHECK(log.find(d.device_path("td") + " 16MiB (O_DIRECT),") != std::string::npos);
    for (const char* name : {"ud", "ub", "td"}) exercise(d, name);
    CHECK(d.log().find("failed:") == std::string::npos);   // no request failed
    CHECK(d.stop() == 0);
}
