#include <doctest/doctest.h>

#include "nbd/handshake.hpp"
#include "nbd/wire.hpp"

using namespace nbdsched::nbd;

namespace {
std::vector<std::uint8_t> bytes(std::initializer_list<int> list) {
    std::vector<std::uint8_t> v;
    for (int b : list) v.push_back(static_cast<std::uint8_t>(b));
    return v;
}
}   // namespace

TEST_CASE("greeting is NBDMAGIC IHAVEOPT flags") {
    auto g = encode_greeting(flag_fixed_newstyle | flag_no_zeroes);
    CHECK(std::string(g.begin(), g.begin() + 8) == "NBDMAGIC");
    CHECK(std::string(g.begin() + 8, g.begin() + 16) == "IHAVEOPT");
    CHECK(g[16] == 0);
    CHECK(g[17] == 3);
}

TEST_CASE("client flags: offered bits accepted, unknown bits refused") {
    std::uint16_t offered = flag_fixed_newstyle | flag_no_zeroes;
    auto ok = bytes({0, 0, 0, 3});
    auto f = decode_client_flags(std::span<const std::uint8_t, 4>(ok.data(), 4), offered);
    REQUIRE(f);
    CHECK(f->fixed_newstyle);
    CHECK(f->no_zeroes);
    auto none = bytes({0, 0, 0, 0});
    f = decode_client_flags(std::span<const std::uint8_t, 4>(none.data(), 4), offered);
    REQUIRE(f);
    CHECK_FALSE(f->fixed_newstyle);
    auto unknown = bytes({0, 0, 0, 4});
    CHECK_FALSE(decode_client_flags(std::span<const std::uint8_t, 4>(unknown.data(), 4), offered));
    auto high = bytes({0x80, 0, 0, 1});
    CHECK_FALSE(decode_client_flags(std::span<const std::uint8_t, 4>(high.data(), 4), offered));
    // NO_ZEROES from the client is an error when the server did not offer it.
    CHECK_FALSE(decode_client_flags(std::span<const std::uint8_t, 4>(ok.data(), 4), flag_fixed_newstyle));
}

TEST_CASE("option header round trip and bad magic") {
    auto payload = bytes({1, 2, 3});
    auto msg = encode_option(7, payload);
    REQUIRE(msg.size() == option_header_size + 3);
    auto h = decode_option_header(std::span<const std::uint8_t, option_header_size>(msg.data(), option_header_size));
    REQUIRE(h);
    CHECK(h->option == 7);
    CHECK(h->length == 3);
    msg[0] ^= 1;
    CHECK_FALSE(decode_option_header(std::span<const std::uint8_t, option_header_size>(msg.data(), option_header_size)));
}

TEST_CASE("info request round trip") {
    std::uint16_t infos[] = {info_name, info_block_size};
    auto data = encode_info_request("disk0", infos);
    auto r = decode_info_request(data);
    REQUIRE(r);
    CHECK(r->name == "disk0");
    REQUIRE(r->infos.size() == 2);
    CHECK(r->infos[1] == info_block_size);
}

TEST_CASE("info request with inconsistent lengths is refused, never overread") {
    std::uint16_t infos[] = {info_name};
    auto data = encode_info_request("disk0", infos);
    // Truncated anywhere: refused.
    for (std::size_t n = 0; n < data.size(); ++n)
        CHECK_FALSE(decode_info_request(std::span<const std::uint8_t>(data.data(), n)));
    // Trailing garbage: refused.
    auto longer = data;
    longer.push_back(0);
    CHECK_FALSE(decode_info_request(longer));
    // Name length pointing past the end: refused.
    auto huge = data;
    store_u32(huge.data(), 0xffffffffu);
    CHECK_FALSE(decode_info_request(huge));
    // Empty name, no infos: fine (the default export).
    auto empty = encode_info_request("", {});
    auto r = decode_info_request(empty);
    REQUIRE(r);
    CHECK(r->name.empty());
    CHECK(r->infos.empty());
}

TEST_CASE("option replies decode back") {
    std::vector<std::uint8_t> out;
    append_info_export(out, 7, 1ull << 30, tflag_has_flags | tflag_send_flush);
    append_info_block_size(out, 7, 1, 4096, 32u << 20);
    append_error(out, 7, rep_err_unknown, "nope");
    append_ack(out, 7);
    std::span<const std::uint8_t> in(out);
    OptionReply r;
    auto n = decode_option_reply(in, r);
    REQUIRE(n);
    CHECK(*n == option_reply_header_size + 12);
    CHECK(r.type == rep_info);
    CHECK(load_u16(r.data.data()) == info_export);
    CHECK(load_u64(r.data.data() + 2) == (1ull << 30));
    CHECK(load_u16(r.data.data() + 10) == (tflag_has_flags | tflag_send_flush));
    in = in.subspan(*n);
    n = decode_option_reply(in, r);
    REQUIRE(n);
    CHECK(r.data.size() == 14);
    CHECK(load_u32(r.data.data() + 2) == 1);
    CHECK(load_u32(r.data.data() + 6) == 4096);
    CHECK(load_u32(r.data.data() + 10) == (32u << 20));
    in = in.subspan(*n);
    n = decode_option_reply(in, r);
    REQUIRE(n);
    CHECK(r.type == rep_err_unknown);
    CHECK(std::string(r.data.begin(), r.data.end()) == "nope");
    in = in.subspan(*n);
    n = decode_option_reply(in, r);
    REQUIRE(n);
    CHECK(r.type == rep_ack);
    CHECK(*n == in.size());
    // Incomplete input: 0 consumed.
    CHECK(decode_option_reply(in.subspan(0, 5), r) == std::size_t(0));
}

TEST_CASE("export name reply with and without zeroes") {
    std::vector<std::uint8_t> out;
    append_export_name_reply(out, 4096, 1, false);
    CHECK(out.size() == export_name_reply_size + export_name_zeroes);
    out.clear();
    append_export_name_reply(out, 4096, 1, true);
    CHECK(out.size() == export_name_reply_size);
    CHECK(load_u64(out.data()) == 4096);
    CHECK(load_u16(out.data() + 8) == 1);
}
