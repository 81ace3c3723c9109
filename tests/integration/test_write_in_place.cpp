// WRITE payloads received straight into a RAM device's pages: small and
// large, aligned and unaligned, overlapping, with trims between, over Unix
// and TCP, read back against a model; writes in flight together leave only
// their own bytes; writes of zeros over holes stay holes, small ones and
// large ones received in place alike (64 MiB of zeros in 1 MiB writes,
// one at a time and 8 in flight, cost the daemon no memory), while data
// and zeros written over it read back; a client that dies (or a daemon that
// stops) in the middle of a payload lets go of the pages it pinned, and
// the pages nothing came into are holes again; a client that stalls in the
// middle of a payload lets go of them after a while and its data still reads
// back; fault injection still sees (and fails) every write;
// devices with read-ahead or a timing model read back what was written.
#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"
#include "raw_client.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_mib = 1ull << 20;

std::uint64_t next(std::uint64_t& state) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
}

Nbd connect_with_allocation(const std::string& uri) {
    Nbd h;
    REQUIRE(nbd_add_meta_context(h, LIBNBD_CONTEXT_BASE_ALLOCATION) == 0);
    REQUIRE_MESSAGE(nbd_connect_uri(h, uri.c_str()) == 0, nbd_error());
    return h;
}

// Whether [offset, offset+length) is one hole, as base:allocation says.
bool is_hole(nbd_handle* h, std::uint64_t offset, std::uint64_t length) {
    struct Seen {
        bool hole = true;
        std::uint64_t covered = 0;
    } seen;
    nbd_extent_callback cb{};
    cb.callback = [](void* user, const char*, std::uint64_t, std::uint32_t* entries, std::size_t n, int*) {
        auto* s = static_cast<Seen*>(user);
        for (std::size_t i = 0; i + 1 < n; i += 2) {
            s->covered += entries[i];
            if ((entries[i + 1] & LIBNBD_STATE_HOLE) == 0) s->hole = false;
        }
        return 0;
    };
    cb.user_data = &seen;
    REQUIRE_MESSAGE(nbd_block_status(h, length, offset, cb, LIBNBD_CMD_FLAG_REQ_ONE) == 0, nbd_error());
    return seen.hole && seen.covered >= length;
}

void wait_all(nbd_handle* h) {
    while (nbd_aio_in_flight(h) > 0) REQUIRE_MESSAGE(nbd_poll(h, -1) >= 0, nbd_error());
}

}   // namespace

TEST_CASE("writes in place of every size and alignment, overlapping, trims between, read back over unix and tcp") {
    Daemon d(standard_spec());
    Nbd unix_h = connect(d.uri());
    Nbd tcp_h = connect(d.tcp_uri());
    constexpr std::uint64_t region = 8 * k_mib;
    std::vector<std::uint8_t> model(region, 0);
    std::uint64_t state = 7;
    for (int i = 0; i < 160; ++i) {
        nbd_handle* h = i % 2 ? tcp_h.get() : unix_h.get();
        const auto kind = next(state) % 10;
        std::uint64_t length = kind < 4   ? 1 + next(state) % 8192                   // with its header
                               : kind < 8 ? (64 << 10) + next(state) % (2 * k_mib)   // straight from the socket
                                          : 4096 * (1 + next(state) % 64);           // page aligned
        length = std::min(length, region);
        std::uint64_t offset = next(state) % (region - length + 1);
        if (kind == 9) offset &= ~std::uint64_t{4095};
        CAPTURE(i);
        CAPTURE(offset);
        CAPTURE(length);
        if (next(state) % 4 == 0) {
            REQUIRE_MESSAGE(nbd_trim(h, length, offset, 0) == 0, nbd_error());
            std::fill_n(model.begin() + offset, length, 0);
            continue;
        }
        std::vector<std::uint8_t> data = pattern(offset, length, 1000 + i);
        if (next(state) % 8 == 0) std::fill(data.begin(), data.end(), 0);   // zeros: over a hole or not
        REQUIRE_MESSAGE(nbd_pwrite(h, data.data(), length, offset, 0) == 0, nbd_error());
        std::copy(data.begin(), data.end(), model.begin() + offset);
    }
    std::vector<std::uint8_t> back(region);
    REQUIRE_MESSAGE(nbd_pread(unix_h, back.data(), region, 0, 0) == 0, nbd_error());
    const auto diff = std::mismatch(back.begin(), back.end(), model.begin());
    CHECK_MESSAGE(diff.first == back.end(), "first difference at ", diff.first - back.begin());
    CHECK(d.stop() == 0);
}

TEST_CASE("writes in flight together leave only their own bytes, and the next write wins") {
    Daemon d(standard_spec());
    Nbd h = connect(d.uri());
    std::vector<std::uint8_t> a(k_mib, 0x11), b(k_mib, 0x22), c(4096, 0x33);
    for (int round = 0; round < 8; ++round) {
        REQUIRE(nbd_aio_pwrite(h, a.data(), a.size(), 0, {}, 0) >= 0);
        REQUIRE(nbd_aio_pwrite(h, b.data(), b.size(), 0, {}, 0) >= 0);
        REQUIRE(nbd_aio_trim(h, k_mib / 2, k_mib / 4, {}, 0) >= 0);
        REQUIRE(nbd_aio_pwrite(h, c.data(), c.size(), 4096 + 100, {}, 0) >= 0);
        wait_all(h);
        std::vector<std::uint8_t> back(k_mib);
        REQUIRE(nbd_pread(h, back.data(), back.size(), 0, 0) == 0);
        CHECK(std::all_of(back.begin(), back.end(), [](std::uint8_t x) { return x == 0 || x == 0x11 || x == 0x22 || x == 0x33; }));
        REQUIRE(write_pattern(h, k_mib, 0, 50 + round) == 0);
        CHECK(verify_pattern(h, k_mib, 0, 50 + round) == "");
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("writes of zeros over holes stay holes, small ones and large ones received in place; TRIM frees data") {
    Daemon d(standard_spec());
    Nbd h = connect_with_allocation(d.uri());
    std::vector<std::uint8_t> zeros(k_mib, 0);
    REQUIRE(nbd_pwrite(h, zeros.data(), 4096, k_mib, 0) == 0);
    CHECK(is_hole(h, k_mib, 4096));
    REQUIRE(nbd_pwrite(h, zeros.data(), 32 << 10, k_mib + (64 << 10), 0) == 0);
    CHECK(is_hole(h, k_mib + (64 << 10), 32 << 10));
    REQUIRE(write_pattern(h, 4096, 2 * k_mib, 3) == 0);
    CHECK_FALSE(is_hole(h, 2 * k_mib, 4096));
    // 1 MiB is received from the socket into its pages before anyone has
    // seen it; the pages it left all zeros are given back once it is in.
    REQUIRE(nbd_pwrite(h, zeros.data(), zeros.size(), 4 * k_mib, 0) == 0);
    CHECK(is_hole(h, 4 * k_mib, k_mib));
    CHECK(reads_zero(h, k_mib, 4 * k_mib));
    REQUIRE(write_pattern(h, k_mib, 4 * k_mib, 4) == 0);
    CHECK_FALSE(is_hole(h, 4 * k_mib, k_mib));
    REQUIRE(nbd_trim(h, k_mib, 4 * k_mib, 0) == 0);
    CHECK(is_hole(h, 4 * k_mib, k_mib));
    CHECK(d.stop() == 0);
}

// `dd if=/dev/zero bs=1M`, or a kernel client zeroing with plain writes:
// every payload is received in place. Written through write() in 4 KiB
// pieces the same zeros cost nothing; received in place they must not
// either (a tenant could otherwise take the device's whole size in memory).
TEST_CASE("64 MiB of zeros in 1 MiB writes received in place leave holes and cost no memory; data and zeros read back") {
    Daemon d(standard_spec());   // 64 MiB
    constexpr std::uint64_t device = 64 * k_mib;
    Nbd h = connect_with_allocation(d.uri());
    std::vector<std::uint8_t> zeros(k_mib, 0);
    REQUIRE(nbd_pwrite(h, zeros.data(), zeros.size(), 0, 0) == 0);   // the first pages the arena maps
    const long before = rss_kib(d.pid());
    for (std::uint64_t at = 0; at < device / 2; at += k_mib)   // one at a time
        REQUIRE_MESSAGE(nbd_pwrite(h, zeros.data(), zeros.size(), at, 0) == 0, nbd_error());
    for (std::uint64_t at = device / 2; at < device; at += k_mib) {   // 8 in flight, as a kernel client sends them
        while (nbd_aio_in_flight(h) >= 8) REQUIRE_MESSAGE(nbd_poll(h, -1) >= 0, nbd_error());
        REQUIRE_MESSAGE(nbd_aio_pwrite(h, zeros.data(), zeros.size(), at, {}, 0) >= 0, nbd_error());
    }
    wait_all(h);
    const long grown = rss_kib(d.pid()) - before;
    CHECK_MESSAGE(grown < 16 * 1024, "the daemon grew by ", grown, " KiB over 64 MiB of zeros written");
    CHECK(is_hole(h, 0, device));
    CHECK(reads_zero(h, device / 2, 0));   // a READ is at most 32 MiB
    CHECK(reads_zero(h, device / 2, device / 2));
    // Data in the same 1 MiB writes reads back and is allocated...
    for (std::uint64_t at = 0; at < 8 * k_mib; at += k_mib) REQUIRE(write_pattern(h, k_mib, at, 20) == 0);
    for (std::uint64_t at = 0; at < 8 * k_mib; at += k_mib) CHECK(verify_pattern(h, k_mib, at, 20) == "");
    CHECK_FALSE(is_hole(h, 0, 4096));
    CHECK_FALSE(is_hole(h, 8 * k_mib - 4096, 4096));
    // ...and zeros written over it read back as zeros (its pages stay, as with write()).
    for (std::uint64_t at = 0; at < 8 * k_mib; at += k_mib)
        REQUIRE(nbd_pwrite(h, zeros.data(), zeros.size(), at, 0) == 0);
    CHECK(reads_zero(h, 8 * k_mib, 0));
    CHECK(d.stop() == 0);
}

TEST_CASE("a client dying in the middle of a large payload leaves holes where nothing came") {
    Daemon d(standard_spec());
    {
        RawClient raw(d.socket_path());
        REQUIRE(raw.handshake("default", false));
        raw.send(RawClient::request(WRITE, 1, 16 * k_mib, 8 * k_mib));
        raw.send(pattern(16 * k_mib, k_mib, 9));
        raw.close_now();
    }
    Nbd h = connect_with_allocation(d.uri());
    // The daemon sees the close on its own time: ask until it has (or give up after 30 s).
    bool hole = false;
    for (int i = 0; i < 300 && !(hole = is_hole(h, 17 * k_mib, 7 * k_mib)); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    CHECK_MESSAGE(hole, "the 7 MiB never received are still allocated");
    CHECK(reads_zero(h, 7 * k_mib, 17 * k_mib));
    CHECK(d.stop() == 0);
}

// A pin left behind would make every page freed afterwards wait for it:
// writing and trimming 8 MiB over and over would grow the daemon by all of it.
TEST_CASE("a client dying in the middle of a payload lets go of the pages it was written into") {
    Daemon d(standard_spec());
    {
        RawClient raw(d.socket_path());
        REQUIRE(raw.handshake("default", false));
        raw.send(RawClient::request(WRITE, 1, 0, k_mib));
        const auto half = pattern(0, k_mib / 2, 9);
        raw.send(half);
        raw.close_now();
    }
    Nbd h = connect(d.uri());
    constexpr std::uint64_t churn = 8 * k_mib;
    REQUIRE(write_pattern(h, churn, 16 * k_mib, 1) == 0);   // the arena holds these pages from now on
    REQUIRE(nbd_trim(h, churn, 16 * k_mib, 0) == 0);
    const long before = rss_kib(d.pid());
    for (int i = 0; i < 16; ++i) {
        REQUIRE(write_pattern(h, churn, 16 * k_mib, 2 + i) == 0);
        REQUIRE(nbd_trim(h, churn, 16 * k_mib, 0) == 0);
    }
    const long grown = rss_kib(d.pid()) - before;
    CHECK_MESSAGE(grown < 48 * 1024, "the daemon grew by ", grown, " KiB over 128 MiB written and trimmed");
    // The device still serves; the half payload may or may not be there.
    REQUIRE(write_pattern(h, k_mib, 0, 4) == 0);
    CHECK(verify_pattern(h, k_mib, 0, 4) == "");
    CHECK(d.stop() == 0);
}

// A paused VM or a SIGSTOPped nbdcopy in the middle of a large WRITE: its
// payload must not keep the pages of that device pinned while it waits,
// or every page any client frees meanwhile stays resident (300 rounds of
// 1 MiB written and trimmed grew the daemon by 300 MiB on a 64 MiB device).
// One client stalls with most of a 1 MiB payload to come (read straight from
// the socket), one with the last 4 KiB of a 64 KiB payload to come (read
// through the read buffer); both finish later and their data reads back.
TEST_CASE("a client stalled in the middle of a payload does not keep the pages other clients free") {
    Daemon d(standard_spec());   // 64 MiB
    Nbd h = connect(d.uri());
    constexpr std::uint64_t churn_at = 8 * k_mib;
    for (int i = 0; i < 4; ++i) {   // the arena maps the churn's pages once
        REQUIRE(write_pattern(h, k_mib, churn_at + i * k_mib, 1) == 0);
        REQUIRE(nbd_trim(h, k_mib, churn_at + i * k_mib, 0) == 0);
    }
    RawClient large(d.socket_path());
    REQUIRE(large.handshake("default", false));
    const auto large_data = pattern(0, k_mib, 5);
    large.send(RawClient::request(WRITE, 1, 0, k_mib));
    large.send(std::vector<std::uint8_t>(large_data.begin(), large_data.begin() + (128 << 10)));
    RawClient small(d.socket_path());
    REQUIRE(small.handshake("default", false));
    constexpr std::uint64_t small_at = 2 * k_mib, small_len = 64 << 10;
    const auto small_data = pattern(small_at, small_len, 6);
    small.send(RawClient::request(WRITE, 2, small_at, small_len));
    small.send(std::vector<std::uint8_t>(small_data.begin(), small_data.end() - 4096));
    // The daemon lets go of a stalled payload's pages after 100 ms; give it ample time.
    std::this_thread::sleep_for(std::chrono::seconds(1));
    const long before = rss_kib(d.pid());
    for (int i = 0; i < 300; ++i) {
        const std::uint64_t at = churn_at + (i % 32) * k_mib;
        REQUIRE(write_pattern(h, k_mib, at, 10 + i) == 0);
        REQUIRE(nbd_trim(h, k_mib, at, 0) == 0);
    }
    const long grown = rss_kib(d.pid()) - before;
    CHECK_MESSAGE(grown < 32 * 1024, "the daemon grew by ", grown, " KiB over 300 MiB written and trimmed");
    // The stalled clients go on: acknowledged, and their whole payloads read back.
    large.send(std::vector<std::uint8_t>(large_data.begin() + (128 << 10), large_data.end()));
    small.send(std::vector<std::uint8_t>(small_data.end() - 4096, small_data.end()));
    CHECK(large.recv_simple_reply(1) == 0);
    CHECK(small.recv_simple_reply(2) == 0);
    CHECK(verify_pattern(h, k_mib, 0, 5) == "");
    CHECK(verify_pattern(h, small_len, small_at, 6) == "");
    CHECK(reads_zero(h, k_mib, small_at - k_mib));   // nothing beside them
    CHECK(d.stop() == 0);
}

TEST_CASE("a daemon stopping while a payload is half received exits cleanly") {
    Daemon d(standard_spec());
    RawClient raw(d.socket_path());
    REQUIRE(raw.handshake("default", false));
    raw.send(RawClient::request(WRITE, 1, 4096, 2 * k_mib));
    raw.send(pattern(4096, k_mib, 9));
    Nbd h = connect(d.uri());   // meanwhile the daemon serves others
    REQUIRE(write_pattern(h, 4096, 0, 5) == 0);
    CHECK(d.stop() == 0);
}

TEST_CASE("a write that fault injection fails leaves the device as it was: its payload was not put in place") {
    Daemon d(yaml_spec("devices:\n"
                       "  - name: d0\n"
                       "    size: 64MiB\n"
                       "    faults:\n"
                       "      - {op: write, error: ENOSPC, offset: 2MiB, length: 1MiB}\n"
                       "exports:\n  - {name: default, device: d0}\n"));
    Nbd h = connect(d.uri());
    std::vector<std::uint8_t> data = pattern(2 * k_mib, k_mib, 7);
    CHECK(nbd_pwrite(h, data.data(), data.size(), 2 * k_mib, 0) == -1);
    CHECK(nbd_get_errno() == ENOSPC);
    CHECK(nbd_pwrite(h, data.data(), 4096, 2 * k_mib, 0) == -1);
    CHECK(reads_zero(h, k_mib, 2 * k_mib));
    REQUIRE(write_pattern(h, k_mib, 4 * k_mib, 8) == 0);   // outside the rule: written
    CHECK(verify_pattern(h, k_mib, 4 * k_mib, 8) == "");
    CHECK(d.stop() == 0);
}

TEST_CASE("writes on devices with read-ahead or a timing model read back") {
    for (const char* yaml : {"    read_ahead_kb: 256\n", "    profile: nvme\n"}) {
        CAPTURE(yaml);
        Daemon d(profile_spec(yaml, 64 * k_mib));
        Nbd h = connect(d.uri());
        std::vector<std::uint8_t> buf(128 << 10);
        for (std::uint64_t at = 0; at < 4 * k_mib; at += buf.size())   // a sequential reader: read-ahead fills its cache
            REQUIRE(nbd_pread(h, buf.data(), buf.size(), at, 0) == 0);
        REQUIRE(write_pattern(h, k_mib + 3, k_mib - 1, 11) == 0);
        REQUIRE(write_pattern(h, 4000, 3 * k_mib + 5, 12) == 0);
        CHECK(verify_pattern(h, k_mib + 3, k_mib - 1, 11) == "");
        CHECK(verify_pattern(h, 4000, 3 * k_mib + 5, 12) == "");
        CHECK(d.stop() == 0);
    }
}
