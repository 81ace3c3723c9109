// The client side of NBD_OPT_GO against the server's own negotiation code:
// what encode_go sends is what handle_option accepts, and GoReplies reads
// its answers; malformed replies are errors, never a crash.
#include <doctest/doctest.h>

#include "nbd/client_go.hpp"
#include "nbd/negotiation.hpp"
#include "nbd/wire.hpp"
#include "option_replies.hpp"

using namespace nbdsched::nbd;

namespace {

const std::uint32_t go = static_cast<std::uint32_t>(Option::go);

OptionReply reply(std::uint32_t type, std::vector<std::uint8_t> data, std::uint32_t option = go) {
    return OptionReply{option, type, std::move(data)};
}

}   // namespace

TEST_CASE("encode_go is accepted by the server, and its replies read back") {
    auto greeting = encode_greeting(flag_fixed_newstyle | flag_no_zeroes);
    auto handshake_flags = decode_greeting(greeting);
    REQUIRE(handshake_flags);
    auto bytes = encode_go(*handshake_flags, "disk0");
    auto client = decode_client_flags(std::span<const std::uint8_t, 4>(bytes.data(), 4), *handshake_flags);
    REQUIRE(client);
    CHECK(client->fixed_newstyle);
    CHECK(client->no_zeroes);
    auto header = decode_option_header(std::span<const std::uint8_t, option_header_size>(bytes.data() + 4, 16));
    REQUIRE(header);
    CHECK(header->option == go);

    ExportInfo e;
    e.name = "disk0";
    e.size = 1u << 30;
    e.flags = tflag_has_flags | tflag_send_flush | tflag_rotational;
    e.min_block = 512;
    Negotiation state;
    state.client = *client;
    std::vector<std::uint8_t> out;
    auto result = handle_option(state, *header, std::span(bytes).subspan(20), std::span(&e, 1), out);
    REQUIRE_MESSAGE(result.next == Next::transmission, result.reason);

    GoReplies replies;
    auto all = test::replies(out);
    REQUIRE(!all.empty());
    for (std::size_t i = 0; i + 1 < all.size(); ++i) CHECK(replies.feed(all[i]) == GoReplies::State::more);
    CHECK(replies.feed(all.back()) == GoReplies::State::done);
    CHECK(replies.result().size == (1u << 30));
    CHECK(replies.result().flags == result.transmission_flags);
    CHECK((replies.result().flags & tflag_rotational) != 0);
    CHECK(replies.result().min_block == 512);
    CHECK(replies.result().preferred_block == 4096);
}

TEST_CASE("greetings that are not fixed newstyle are refused") {
    auto greeting = encode_greeting(flag_no_zeroes);   // no FIXED_NEWSTYLE
    CHECK_FALSE(decode_greeting(greeting));
    greeting = encode_greeting(flag_fixed_newstyle);
    greeting[0] ^= 1;
    CHECK_FALSE(decode_greeting(greeting));
    auto plain = encode_greeting(flag_fixed_newstyle);
    auto bytes = encode_go(*decode_greeting(plain), "");
    CHECK(load_u32(bytes.data()) == flag_c_fixed_newstyle);   // no-zeroes only when offered
}

TEST_CASE("bad or refusing replies fail with a reason") {
    GoReplies refused;
    std::string text = "no such export";
    CHECK(refused.feed(reply(rep_err_unknown, {text.begin(), text.end()})) == GoReplies::State::failed);
    CHECK(refused.error() == "NBD_REP_ERR_UNKNOWN: no such export");

    GoReplies early_ack;
    CHECK(early_ack.feed(reply(rep_ack, {})) == GoReplies::State::failed);
    CHECK(early_ack.error().find("without NBD_INFO_EXPORT") != std::string::npos);

    GoReplies short_info;
    CHECK(short_info.feed(reply(rep_info, {0, 0, 1, 2})) == GoReplies::State::failed);
    GoReplies empty_info;
    CHECK(empty_info.feed(reply(rep_info, {})) == GoReplies::State::failed);
    GoReplies bad_block;
    CHECK(bad_block.feed(reply(rep_info, {0, 3, 0, 0})) == GoReplies::State::failed);
    GoReplies wrong_option;
    CHECK(wrong_option.feed(reply(rep_ack, {}, 3)) == GoReplies::State::failed);
    GoReplies odd_type;
    CHECK(odd_type.feed(reply(rep_server, {})) == GoReplies::State::failed);

    GoReplies skips_unknown;
    CHECK(skips_unknown.feed(reply(rep_info, {0, 99, 1, 2, 3})) == GoReplies::State::more);
}
