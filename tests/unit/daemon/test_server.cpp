// The server over a real unix socket: data paths, per-request errors,
// pipelining, hostile clients, back-pressure and shutdown.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <numeric>
#include <set>
#include <thread>

#include "nbd/handshake.hpp"
#include "nbd/wire.hpp"
#include "pattern.hpp"
#include "raw_client.hpp"
#include "server_fixture.hpp"

using namespace nbdsched;
using namespace nbdsched::testing;
using namespace nbdsched::testlib;
using namespace nbdsched::nbd;

namespace {

// One request, one reply.
Reply roundtrip(RawClient& c, std::uint16_t type, std::uint64_t offset, std::uint32_t length,
                std::uint16_t flags = 0, const std::vector<std::uint8_t>& payload = {}) {
    static std::uint64_t cookie = 1000;
    auto id = ++cookie;
    c.send(type, id, offset, length, flags, payload);
    auto r = c.receive(type == READ ? length : 0);
    REQUIRE(r);
    CHECK(r->cookie == id);
    // Structured replies answer READs and errors; other successes are
    // simple replies, which a client reads in one piece.
    if (r->error == 0) CHECK(r->simple == (!c.structured() || type != READ));
    return *r;
}

}   // namespace

TEST_CASE("write, read back, flush, trim and write_zeroes, with simple and structured replies") {
    TestServer server(standard_config());
    for (bool structured : {false, true}) {
        CAPTURE(structured);
        RawClient c(server.socket());
        REQUIRE(c.handshake("default", structured));
        CHECK(c.size() == (16u << 20));
        CHECK((c.flags() & tflag_read_only) == 0);
        CHECK((c.flags() & tflag_can_multi_conn) != 0);
        CHECK(((c.flags() & tflag_send_df) != 0) == structured);

        auto data = pattern(0, 65536, structured ? 3 : 5);
        CHECK(roundtrip(c, WRITE, 8192, 65536, 0, data).error == 0);
        auto r = roundtrip(c, READ, 8192, 65536);
        CHECK(r.error == 0);
        CHECK(r.data == data);
        CHECK(roundtrip(c, WRITE, 4096, 512, cmd_flag_fua, pattern(0, 512, 9)).error == 0);
        CHECK(roundtrip(c, FLUSH, 0, 0).error == 0);

        CHECK(roundtrip(c, TRIM, 8192, 4096).error == 0);
        r = roundtrip(c, READ, 8192, 4096);
        CHECK(r.data == std::vector<std::uint8_t>(4096, 0));   // RAM frees trimmed pages
        CHECK(roundtrip(c, ZEROES, 12288, 8192, cmd_flag_no_hole).error == 0);
        r = roundtrip(c, READ, 12288, 8192);
        CHECK(r.data == std::vector<std::uint8_t>(8192, 0));
        r = roundtrip(c, READ, 20480, 100);   // untouched bytes survive
        CHECK(std::equal(r.data.begin(), r.data.end(), data.begin() + 12288));

        // Empty requests are answered without touching anything.
        CHECK(roundtrip(c, READ, 0, 0).error == 0);
        CHECK(roundtrip(c, WRITE, 0, 0).error == 0);
    }
}

TEST_CASE("per-request errors keep the connection usable") {
    TestServer server(standard_config());
    const std::uint64_t size = 16u << 20;
    for (bool structured : {false, true}) {
        CAPTURE(structured);
        RawClient c(server.socket());
        REQUIRE(c.handshake("default", structured));
        CHECK(roundtrip(c, READ, size - 512, 1024).error == err_inval);
        CHECK(roundtrip(c, WRITE, size - 512, 1024, 0, pattern(0, 1024, 1)).error == err_nospc);
        CHECK(roundtrip(c, ZEROES, size, 4096).error == err_nospc);
        CHECK(roundtrip(c, TRIM, ~0ull - 100, 4096).error == err_inval);
        CHECK(roundtrip(c, 42, 0, 0).error == err_inval);                 // unknown command
        CHECK(roundtrip(c, READ, 0, 512, 1u << 12).error == err_inval);   // unknown flag
        CHECK(roundtrip(c, READ, 0, (32u << 20) + 1).error == (structured ? err_overflow : err_inval));
        // An oversize WRITE (EINVAL: EOVERFLOW is for READ only): its payload
        // is consumed, so the next request parses.
        CHECK(roundtrip(c, WRITE, 0, (32u << 20) + 4096, 0, std::vector<std::uint8_t>((32u << 20) + 4096, 1))
                  .error == err_inval);
        auto data = pattern(0, 4096, 77);
        CHECK(roundtrip(c, WRITE, 0, 4096, 0, data).error == 0);
        CHECK(roundtrip(c, READ, 0, 4096).data == data);
    }
}

TEST_CASE("a read-only export refuses writes with EPERM and serves reads") {
    TestServer server(standard_config());
    RawClient c(server.socket());
    REQUIRE(c.handshake("ro", true));
    CHECK((c.flags() & tflag_read_only) != 0);
    CHECK(roundtrip(c, WRITE, 0, 512, 0, pattern(0, 512, 1)).error == err_perm);
    CHECK(roundtrip(c, TRIM, 0, 512).error == err_perm);
    CHECK(roundtrip(c, ZEROES, 0, 512).error == err_perm);
    CHECK(roundtrip(c, READ, 0, 512).error == 0);
    CHECK(roundtrip(c, FLUSH, 0, 0).error == 0);
}

TEST_CASE("many requests in flight on one connection, all answered once") {
    auto config = standard_config();
    config.limits.max_inflight_per_connection = 8;   // forces back-pressure pauses
    config.limits.max_inflight_bytes_per_connection = 64u << 10;
    TestServer server(config);
    RawClient c(server.socket());
    REQUIRE(c.handshake("default", true));
    constexpr int n = 300;
    // Each cookie writes its own block, then everything is read back.
    std::vector<std::uint8_t> all;
    for (int i = 0; i < n; ++i) {
        auto block = pattern(0, 4096, static_cast<std::uint8_t>(i));
        c.send(WRITE, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i) * 4096, 4096, 0, block);
    }
    std::set<std::uint64_t> seen;
    for (int i = 0; i < n; ++i) {
        auto r = c.receive(0);
        REQUIRE(r);
        CHECK(r->error == 0);
        CHECK(seen.insert(r->cookie).second);
    }
    for (int i = 0; i < n; ++i) c.send(READ, 1000u + i, static_cast<std::uint64_t>(i) * 4096, 4096);
    for (int i = 0; i < n; ++i) {
        auto r = c.receive(4096);
        REQUIRE(r);
        REQUIRE(r->cookie >= 1000);
        CHECK(r->data == pattern(0, 4096, static_cast<std::uint8_t>(r->cookie - 1000)));
    }
}

TEST_CASE("a malformed request closes only its own connection") {
    TestServer server(standard_config());
    RawClient good(server.socket());
    REQUIRE(good.handshake("default", false));
    RawClient bad(server.socket());
    REQUIRE(bad.handshake("default", false));
    std::vector<std::uint8_t> garbage(64, 0xab);
    bad.send_raw(garbage.data(), garbage.size());
    CHECK(bad.closed_by_server());
    CHECK(roundtrip(good, WRITE, 0, 512, 0, pattern(0, 512, 4)).error == 0);
    CHECK(roundtrip(good, READ, 0, 512).data == pattern(0, 512, 4));
}

TEST_CASE("a client vanishing mid-request does not disturb others") {
    TestServer server(standard_config());
    RawClient good(server.socket());
    REQUIRE(good.handshake("default", true));
    {
        RawClient gone(server.socket());
        REQUIRE(gone.handshake("default", true));
        gone.send(WRITE, 1, 0, 65536, 0, pattern(0, 1000, 1));   // 64 KiB promised, 1000 sent
        std::uint8_t half[10] = {0x25, 0x60};
        gone.send_raw(half, sizeof half);
    }
    CHECK(roundtrip(good, READ, 0, 4096).error == 0);
}

// NBD leaves what a READ returns unspecified while a WRITE of its range is
// in flight: on connections of two event loops the copies in and out of the
// RAM device's pages run at once. They must still return only bytes some
// write wrote (under TSan: and be no report, as the race is the protocol's).
TEST_CASE("READs and WRITEs of one range in flight together on two event loops") {
    auto config = standard_config();
    config.limits.threads = 2;   // the second connection goes to the other loop
    TestServer server(config);
    RawClient writer(server.socket());
    REQUIRE(writer.handshake("default", false));
    RawClient reader(server.socket());
    REQUIRE(reader.handshake("default", false));
    constexpr std::uint32_t range = 128u << 10;   // more than a read buffer: received into the pages
    constexpr int writes = 60;
    const auto fill = [](int i) { return static_cast<std::uint8_t>(i % 2 == 0 ? 0x11 : 0x22); };
    std::atomic<bool> writing{true};
    int write_errors = 0;
    std::thread w([&] {
        for (int i = 0; i < writes; ++i) {
            writer.send(WRITE, static_cast<std::uint64_t>(i), 0, range, 0, std::vector<std::uint8_t>(range, fill(i)));
            auto r = writer.receive(0);
            if (!r || r->error != 0) ++write_errors;
        }
        writing = false;
    });
    int reads = 0;
    int read_errors = 0;
    std::size_t foreign_bytes = 0;   // neither zero nor a written fill
    for (std::uint64_t cookie = 0; writing || reads < writes; ++cookie) {
        // 4 KiB reads are copied out of the pages; a 128 KiB one goes from them to the socket.
        const bool whole = cookie % 8 == 0;
        const std::uint32_t length = whole ? range : 4096;
        const std::uint64_t offset = whole ? 0 : (cookie * 4096) % range;
        reader.send(READ, cookie, offset, length);
        auto r = reader.receive(length);
        ++reads;
        if (!r || r->error != 0) {
            ++read_errors;
            continue;
        }
        foreign_bytes += static_cast<std::size_t>(std::count_if(r->data.begin(), r->data.end(), [](std::uint8_t b) {
            return b != 0 && b != 0x11 && b != 0x22;
        }));
    }
    w.join();
    CHECK(write_errors == 0);
    CHECK(read_errors == 0);
    CHECK(foreign_bytes == 0);
    // Once every write is answered, a read sees the last.
    CHECK(roundtrip(reader, READ, 0, range).data == std::vector<std::uint8_t>(range, fill(writes - 1)));
}

TEST_CASE("DISC answers what is in flight, then closes") {
    TestServer server(standard_config());
    RawClient c(server.socket());
    REQUIRE(c.handshake("default", false));
    for (int i = 0; i < 16; ++i) c.send(READ, static_cast<std::uint64_t>(i), 0, 4096);
    c.send(DISC, 99, 0, 0);
    for (int i = 0; i < 16; ++i) {
        auto r = c.receive(4096);
        REQUIRE(r);
        CHECK(r->error == 0);
    }
    CHECK(c.closed_by_server());
}

TEST_CASE("hostile handshakes are closed cleanly") {
    TestServer server(standard_config());
    {
        RawClient c(server.socket());
        std::uint8_t greeting[greeting_size];
        REQUIRE(c.read_exact(greeting, sizeof greeting));
        std::uint8_t flags[4] = {0, 0, 0, 0x80};   // unknown client flag
        c.send_raw(flags, 4);
        CHECK(c.closed_by_server());
    }
    {
        RawClient c(server.socket());
        std::uint8_t greeting[greeting_size];
        REQUIRE(c.read_exact(greeting, sizeof greeting));
        std::uint8_t flags[4] = {0, 0, 0, 1};
        c.send_raw(flags, 4);
        auto opt = encode_option(999, {});
        store_u32(opt.data() + 12, 0x7fffffffu);   // an option length nobody should buffer
        c.send_raw(opt.data(), opt.size());
        CHECK(c.closed_by_server());
    }
    RawClient c(server.socket());
    CHECK(c.handshake("default", true));
}

TEST_CASE("max_connections refuses the connection over the limit") {
    auto config = standard_config();
    config.limits.max_connections = 1;
    TestServer server(config);
    RawClient first(server.socket());
    REQUIRE(first.handshake("default", false));
    RawClient second(server.socket());
    CHECK(second.closed_by_server());
    CHECK(roundtrip(first, READ, 0, 512).error == 0);
}

TEST_CASE("stop() answers in-flight requests and run() returns 0") {
    TestServer server(standard_config());
    RawClient c(server.socket());
    REQUIRE(c.handshake("default", false));
    c.send(WRITE, 1, 0, 4096, 0, pattern(0, 4096, 1));
    auto r = c.receive(0);
    REQUIRE(r);
    CHECK(server.stop() == 0);
    CHECK(c.closed_by_server());
}
