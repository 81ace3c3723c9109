#include <doctest/doctest.h>

#include <vector>

#include "nbd/transmission.hpp"
#include "tools/load/reply_stream.hpp"

using namespace nbdsched;

namespace {

// A simple reply's 16 bytes, then `data` bytes of data.
void put_reply(std::vector<std::uint8_t>& wire, std::uint64_t cookie, std::uint32_t error, std::size_t data) {
    std::uint8_t head[nbd::max_reply_header];
    auto n = nbd::encode_simple_reply(head, error, cookie);
    wire.insert(wire.end(), head, head + n);
    wire.insert(wire.end(), data, 0xee);
}

}   // namespace

TEST_CASE("replies split anywhere by the socket come out whole, after their data") {
    std::vector<std::uint8_t> wire;
    put_reply(wire, 2, 0, 4096);   // a READ of 4 KiB
    put_reply(wire, 0, 0, 0);      // a WRITE
    put_reply(wire, 1, 5, 0);      // a READ that failed: no data follows
    for (std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{16}, std::size_t{4000}, wire.size()}) {
        CAPTURE(piece);
        load::ReplyStream stream(3);
        stream.expect(0, 0);
        stream.expect(1, 512);
        stream.expect(2, 4096);
        std::vector<nbd::SimpleReply> replies;
        std::vector<std::size_t> seen_after;   // bytes fed when each reply came out
        for (std::size_t at = 0; at < wire.size(); at += piece) {
            auto n = std::min(piece, wire.size() - at);
            auto before = replies.size();
            REQUIRE(stream.feed({wire.data() + at, n}, replies));
            for (auto i = before; i < replies.size(); ++i) seen_after.push_back(at + n);
        }
        REQUIRE(replies.size() == 3);
        CHECK(replies[0].cookie == 2);
        CHECK(replies[0].error == 0);
        CHECK(seen_after[0] >= 16 + 4096);   // not before its last data byte
        CHECK(replies[1].cookie == 0);
        CHECK(replies[2].cookie == 1);
        CHECK(replies[2].error == 5);
    }
}

TEST_CASE("a cookie answers once: a second reply to it breaks the stream") {
    load::ReplyStream stream(2);
    stream.expect(1, 0);
    std::vector<std::uint8_t> wire;
    put_reply(wire, 1, 0, 0);
    put_reply(wire, 1, 0, 0);
    std::vector<nbd::SimpleReply> replies;
    CHECK_FALSE(stream.feed(wire, replies));
    CHECK(replies.size() == 1);
}

TEST_CASE("a cookie out of range or a structured chunk breaks the stream") {
    std::vector<nbd::SimpleReply> replies;
    {
        load::ReplyStream stream(2);
        std::vector<std::uint8_t> wire;
        put_reply(wire, 7, 0, 0);
        CHECK_FALSE(stream.feed(wire, replies));
    }
    {
        load::ReplyStream stream(2);
        stream.expect(0, 0);
        std::uint8_t chunk[nbd::max_reply_header];
        auto n = nbd::encode_none_chunk(chunk, 0);
        CHECK_FALSE(stream.feed({chunk, n}, replies));
    }
    CHECK(replies.empty());
}
