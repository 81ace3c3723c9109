// Transmission corner cases on a raw connection: NBD_CMD_DISC after writes
// still in flight (the server must finish them), and zero-length requests
// (any reply is fine, but the connection must carry on).
#include <doctest/doctest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"
#include "nbd/wire.hpp"
#include "raw_client.hpp"

using namespace nbdsched;
using namespace nbdsched::testlib;

TEST_CASE("DISC right after pipelined writes: every write lands") {
    Daemon d(standard_spec());
    {
        RawClient c(d.socket_path());
        c.open_export("default");
        std::vector<std::uint8_t> burst;
        for (std::uint64_t i = 0; i < 16; ++i) {
            const std::uint64_t off = i * 100000 + 3;
            auto r = RawClient::request(WRITE, 100 + i, off, 65536);
            auto data = pattern(off, 65536, 40);
            burst.insert(burst.end(), r.begin(), r.end());
            burst.insert(burst.end(), data.begin(), data.end());
        }
        auto disc = RawClient::request(DISC, 999, 0, 0);
        burst.insert(burst.end(), disc.begin(), disc.end());
        c.send(burst);   // one go: the DISC arrives while writes are in flight
        // Replies to the writes may or may not come; the connection ends.
        CHECK(c.wait_closed());
    }
    {
        Nbd h = connect(d.uri());
        for (std::uint64_t i = 0; i < 16; ++i) {
            CAPTURE(i);
            CHECK(verify_pattern(h, 65536, i * 100000 + 3, 40) == "");
        }
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("zero-length requests get a reply and keep the connection") {
    Daemon d(standard_spec());
    {
        RawClient c(d.socket_path());
        c.open_export("default");
        std::uint64_t handle = 1;
        for (std::uint16_t type : {READ, WRITE, TRIM,
                                   ZEROES}) {
            CAPTURE(type);
            c.send(RawClient::request(type, handle, 4096, 0));
            std::uint32_t error = c.recv_simple_reply(handle++);
            CHECK((error == 0 || error == 22));   // success or NBD_EINVAL
        }
        // FLUSH must have offset and length 0; with others it may be refused.
        c.send(RawClient::request(FLUSH, handle, 0, 0));
        CHECK(c.recv_simple_reply(handle++) == 0);
        // Still in step: a real read.
        c.send(RawClient::request(READ, handle, 0, 4096));
        CHECK(c.recv_simple_reply(handle) == 0);
        CHECK(c.recv(4096).size() == 4096);
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("pipelined requests all get exactly one reply, whatever the order") {
    Daemon d(standard_spec());
    {
        RawClient c(d.socket_path());
        c.open_export("default");
        std::vector<std::uint8_t> burst;
        std::set<std::uint64_t> expected;
        for (std::uint64_t i = 0; i < 48; ++i) {
            const std::uint64_t handle = 0xABCD000000000000ull + i;
            expected.insert(handle);
            if (i % 2 == 0) {
                auto r = RawClient::request(WRITE, handle, i * 8192, 4096);
                burst.insert(burst.end(), r.begin(), r.end());
                burst.resize(burst.size() + 4096, static_cast<std::uint8_t>(i));
            } else {
                auto r = RawClient::request(FLUSH, handle, 0, 0);
                burst.insert(burst.end(), r.begin(), r.end());
            }
        }
        c.send(burst);
        for (std::size_t n = 0; n < 48; ++n) {
            auto r = c.recv(16);
            REQUIRE(nbd::load_u32(r.data()) == nbd::simple_reply_magic);
            CHECK(nbd::load_u32(r.data() + 4) == 0);
            const std::uint64_t handle = nbd::load_u64(r.data() + 8);
            CHECK_MESSAGE(expected.erase(handle) == 1, "unexpected or repeated handle " << handle);
        }
        CHECK(expected.empty());
    }
    CHECK(d.stop() == 0);
}
