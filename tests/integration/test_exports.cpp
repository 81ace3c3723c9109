// Exports as windows onto devices (offset/size), devices kept apart, the
// rotational setting advertised, and TCP carrying the same data.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_mib = 1ull << 20;

ServerSpec window_spec() {
    ServerSpec s;
    s.devices.push_back(device("d0", "ram", 64 * k_mib));
    auto rot = device("d1", "ram", 8 * k_mib);
    rot.rotational = "true";
    s.devices.push_back(rot);
    s.exports.push_back(export_of("whole", "d0"));
    auto win = export_of("window", "d0");
    win.offset = 16 * k_mib;
    win.size = 8 * k_mib;
    s.exports.push_back(win);
    auto tail = export_of("tail", "d0");
    tail.offset = 60 * k_mib;   // size: the rest of the device
    s.exports.push_back(tail);
    s.exports.push_back(export_of("other", "d1"));
    return s;
}

}   // namespace

TEST_CASE("an export window maps onto its device and ends where it says") {
    if (nbdkit_mode()) {
        MESSAGE("nbdkit has no export windows; skipping");
        return;
    }
    Daemon d(window_spec());
    {
        Nbd whole = connect(d.uri("whole"));
        Nbd win = connect(d.uri("window"));
        Nbd tail = connect(d.uri("tail"));
        CHECK(nbd_get_size(win) == static_cast<std::int64_t>(8 * k_mib));
        CHECK(nbd_get_size(tail) == static_cast<std::int64_t>(4 * k_mib));

        // Written through the window, seen at the device offset, and back.
        REQUIRE(write_pattern(win, 65536, 4097, 1) == 0);
        auto data = pattern(4097, 65536, 1);
        std::vector<std::uint8_t> got(65536);
        REQUIRE(nbd_pread(whole, got.data(), got.size(), 16 * k_mib + 4097, 0) == 0);
        CHECK((got == data));
        REQUIRE(write_pattern(whole, 4096, 16 * k_mib + 8 * k_mib - 4096, 2) == 0);
        REQUIRE(nbd_pread(win, got.data(), 4096, 8 * k_mib - 4096, 0) == 0);
        CHECK(std::equal(got.begin(), got.begin() + 4096,
                         pattern(16 * k_mib + 8 * k_mib - 4096, 4096, 2).begin()));
        // Bytes just outside the window are not the window's.
        REQUIRE(write_pattern(whole, 4096, 24 * k_mib, 3) == 0);

        // The window's end is the export's end: the device behind it is larger,
        // yet requests beyond the window fail.
        REQUIRE(nbd_set_strict_mode(win, 0) == 0);
        CHECK(nbd_pread(win, got.data(), 4096, 8 * k_mib - 100, 0) == -1);
        CHECK(nbd_get_errno() == EINVAL);
        CHECK(nbd_pwrite(win, got.data(), 4096, 8 * k_mib, 0) == -1);
        CHECK(nbd_get_errno() == ENOSPC);
        CHECK(nbd_zero(win, 4096, 8 * k_mib - 2048, 0) == -1);
        CHECK(nbd_trim(win, 4096, 8 * k_mib - 2048, 0) == -1);
        CHECK(verify_pattern(whole, 4096, 24 * k_mib, 3) == "");

        // Trim and zero inside the window stay inside it.
        REQUIRE(write_pattern(whole, 2 * k_mib, 15 * k_mib, 4) == 0);
        REQUIRE(nbd_trim(win, k_mib, 0, 0) == 0);
        REQUIRE(nbd_zero(win, 100, k_mib, 0) == 0);
        CHECK(verify_pattern(whole, k_mib, 15 * k_mib, 4) == "");
        CHECK(reads_zero(whole, k_mib + 100, 16 * k_mib));

        // The tail export reaches the device's last byte.
        REQUIRE(write_pattern(tail, 1, 4 * k_mib - 1, 5) == 0);
        std::uint8_t last = 0;
        REQUIRE(nbd_pread(whole, &last, 1, 64 * k_mib - 1, 0) == 0);
        CHECK(last == pattern(4 * k_mib - 1, 1, 5)[0]);   // pattern at the export offset
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("devices are separate, and rotational: true is advertised") {
    if (nbdkit_mode()) {
        MESSAGE("nbdkit: one device per export anyway; skipping");
        return;
    }
    Daemon d(window_spec());
    {
        Nbd whole = connect(d.uri("whole"));
        Nbd other = connect(d.uri("other"));
        CHECK(nbd_is_rotational(whole) == 0);
        CHECK(nbd_is_rotational(other) == 1);
        CHECK(nbd_get_size(other) == static_cast<std::int64_t>(8 * k_mib));
        REQUIRE(write_pattern(whole, k_mib, 0, 6) == 0);
        CHECK(reads_zero(other, k_mib, 0));
        REQUIRE(write_pattern(other, k_mib, 0, 7) == 0);
        CHECK(verify_pattern(whole, k_mib, 0, 6) == "");
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("TCP and unix clients see the same data") {
    if (nbdkit_mode()) {
        MESSAGE("the nbdkit stand-in listens on unix sockets only; skipping");
        return;
    }
    Daemon d(standard_spec());
    {
        Nbd tcp = connect(d.tcp_uri());
        Nbd unix_conn = connect(d.uri());
        REQUIRE(write_pattern(tcp, 3 * k_mib + 5, 12345, 8, LIBNBD_CMD_FLAG_FUA) == 0);
        CHECK(verify_pattern(unix_conn, 3 * k_mib + 5, 12345, 8) == "");
        REQUIRE(write_pattern(unix_conn, 4096, 0, 9) == 0);
        CHECK(verify_pattern(tcp, 4096, 0, 9) == "");
    }
    CHECK(d.stop() == 0);
}
