// Data path through libnbd: patterns of many sizes and alignments, flush, FUA,
// trim and write_zeroes (with and without NO_HOLE).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_size = 64ull << 20;
constexpr std::uint64_t k_mib = 1ull << 20;

struct Range {
    std::uint64_t offset;
    std::size_t len;
};

// Disjoint ranges: single bytes, sector and page sized, unaligned at both
// ends, the maximum request (32 MiB), and the very end of the export.
const std::vector<Range> k_ranges = {
    {0, 1},
    {4095, 1},
    {512, 512},
    {8192, 4096},
    {16383, 4097},
    {100001, 65536},
    {k_mib + 7, k_mib + 3},
    {4 * k_mib + 1, 8 * k_mib - 2},
    {16 * k_mib, 32 * k_mib},
    {k_size - 8192, 4096},
    {k_size - 1, 1},
};

}   // namespace

TEST_CASE("write and read back patterns of many sizes and alignments") {
    Daemon d(standard_spec());
    Nbd h = connect(d.uri());
    std::uint32_t seed = 100;
    for (const auto& r : k_ranges) {
        CAPTURE(r.offset);
        CAPTURE(r.len);
        REQUIRE_MESSAGE(write_pattern(h, r.len, r.offset, seed) == 0, nbd_error());
        CHECK(verify_pattern(h, r.len, r.offset, seed) == "");
        ++seed;
    }
    // Nothing overwrote its neighbour; a fresh connection sees the same data.
    Nbd h2 = connect(d.uri());
    seed = 100;
    for (const auto& r : k_ranges) {
        CAPTURE(r.offset);
        CHECK(verify_pattern(h2, r.len, r.offset, seed) == "");
        ++seed;
    }
    // Never-written bytes between the ranges read as zero.
    CHECK(reads_zero(h2, 8192 - 4096, 4096));
    CHECK(d.stop() == 0);
}

TEST_CASE("flush and FUA writes") {
    Daemon d(standard_spec());
    Nbd h = connect(d.uri());
    REQUIRE(write_pattern(h, 65536, 0, 1) == 0);
    CHECK_MESSAGE(nbd_flush(h, 0) == 0, nbd_error());
    CHECK_MESSAGE(write_pattern(h, 65536, 65536, 2, LIBNBD_CMD_FLAG_FUA) == 0, nbd_error());
    CHECK_MESSAGE(write_pattern(h, 3, 200003, 3, LIBNBD_CMD_FLAG_FUA) == 0, nbd_error());
    CHECK(verify_pattern(h, 65536, 0, 1) == "");
    CHECK(verify_pattern(h, 65536, 65536, 2) == "");
    CHECK(verify_pattern(h, 3, 200003, 3) == "");
    CHECK_MESSAGE(nbd_flush(h, 0) == 0, nbd_error());
    CHECK(d.stop() == 0);
}

TEST_CASE("trim, then the range reads as zeros and its neighbours are intact") {
    Daemon d(standard_spec());
    Nbd h = connect(d.uri());
    REQUIRE(write_pattern(h, 4 * k_mib, k_mib, 7) == 0);
    REQUIRE_MESSAGE(nbd_trim(h, 2 * k_mib, 2 * k_mib, 0) == 0, nbd_error());
    CHECK(reads_zero(h, 2 * k_mib, 2 * k_mib));
    CHECK(verify_pattern(h, k_mib, k_mib, 7) == "");
    CHECK(verify_pattern(h, k_mib, 4 * k_mib, 7) == "");
    // An unaligned trim may leave its own range unchanged, never its neighbours.
    REQUIRE_MESSAGE(nbd_trim(h, 1000, k_mib + 4096 + 17, 0) == 0, nbd_error());
    CHECK(verify_pattern(h, 4096 + 17, k_mib, 7) == "");
    CHECK(verify_pattern(h, 4096, k_mib + 4096 + 17 + 1000, 7) == "");
    CHECK_MESSAGE(nbd_trim(h, 4096, 8192, LIBNBD_CMD_FLAG_FUA) == 0, nbd_error());
    CHECK(d.stop() == 0);
}

TEST_CASE("write_zeroes with and without NO_HOLE") {
    Daemon d(standard_spec());
    Nbd h = connect(d.uri());
    for (std::uint32_t flags : {0u, unsigned{LIBNBD_CMD_FLAG_NO_HOLE},
                                unsigned{LIBNBD_CMD_FLAG_FUA}}) {
        CAPTURE(flags);
        REQUIRE(write_pattern(h, 3 * k_mib, 0, 9) == 0);
        // Aligned and unaligned ranges; the bytes around them must survive.
        REQUIRE_MESSAGE(nbd_zero(h, k_mib, k_mib, flags) == 0, nbd_error());
        REQUIRE_MESSAGE(nbd_zero(h, 1000, 4096 + 17, flags) == 0, nbd_error());
        REQUIRE_MESSAGE(nbd_zero(h, 1, 2 * k_mib + 5, flags) == 0, nbd_error());
        CHECK(reads_zero(h, k_mib, k_mib));
        CHECK(reads_zero(h, 1000, 4096 + 17));
        CHECK(reads_zero(h, 1, 2 * k_mib + 5));
        CHECK(verify_pattern(h, 4096 + 17, 0, 9) == "");
        CHECK(verify_pattern(h, k_mib - (4096 + 17 + 1000), 4096 + 17 + 1000, 9) == "");
        CHECK(verify_pattern(h, 5, 2 * k_mib, 9) == "");
        CHECK(verify_pattern(h, k_mib - 6, 2 * k_mib + 6, 9) == "");
    }
    CHECK(d.stop() == 0);
}
