// Metadata context negotiation and NBD_CMD_BLOCK_STATUS encoding, with the
// hostile inputs a client can send: bad lengths, unknown contexts, queries
// for another export, requests past the end.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "common/utf8.hpp"
#include "nbd/block_status.hpp"
#include "nbd/meta_context.hpp"
#include "nbd/transmission.hpp"
#include "nbd/wire.hpp"
#include "option_replies.hpp"

using namespace nbdsched::nbd;

namespace {

std::vector<ExportInfo> block_status_catalog() {
    std::vector<ExportInfo> v(2);
    v[0].name = "disk0";
    v[0].size = 1 << 20;
    v[1].name = "default";
    v[1].size = 4096;
    return v;
}

Negotiation structured() {
    Negotiation n;
    n.client.fixed_newstyle = true;
    n.structured_replies = true;
    return n;
}

using test::replies;

std::vector<OptionReply> ask(Negotiation& st, Option opt, const std::vector<std::uint8_t>& data) {
    static const auto exports = block_status_catalog();
    std::vector<std::uint8_t> out;
    auto r = handle_option(st, {static_cast<std::uint32_t>(opt), static_cast<std::uint32_t>(data.size())}, data,
                           exports, out);
    CHECK(r.next == Next::more_options);
    return replies(out);
}

std::vector<std::uint8_t> query(std::string_view name, std::vector<std::string_view> qs) {
    return encode_meta_context_request(name, qs);
}

// LIST's replies carry the reserved id 0, SET's the id BLOCK_STATUS will use.
void check_context_reply(const OptionReply& r, std::uint32_t id = base_allocation_id) {
    CHECK(r.type == rep_meta_context);
    REQUIRE(r.data.size() == 4 + base_allocation.size());
    CHECK(load_u32(r.data.data()) == id);
    CHECK(std::string(r.data.begin() + 4, r.data.end()) == base_allocation);
}

struct Descriptor {
    std::uint32_t length, flags;
    bool operator==(const Descriptor&) const = default;
};

std::vector<Descriptor> encode(std::vector<BlockExtent> extents, std::uint32_t length, bool req_one,
                               std::size_t room = 64) {
    std::vector<std::uint8_t> out(room * block_descriptor_size);
    auto n = encode_block_descriptors(out, extents, length, req_one);
    REQUIRE(n % block_descriptor_size == 0);
    std::vector<Descriptor> d;
    for (std::size_t i = 0; i < n; i += 8) d.push_back({load_u32(&out[i]), load_u32(&out[i + 4])});
    return d;
}

}   // namespace

TEST_CASE("meta context request decoding refuses lengths that do not add up") {
    std::vector<std::string_view> qs = {"base:allocation", "x"};
    auto good = query("disk0", qs);
    auto r = decode_meta_context_request(good);
    REQUIRE(r);
    CHECK(r->export_name == "disk0");
    CHECK(r->queries == qs);
    for (std::size_t cut = 0; cut < good.size(); ++cut)   // every truncation
        CHECK_FALSE(decode_meta_context_request(std::span(good).first(cut)));
    auto trailing = good;
    trailing.push_back(0);
    CHECK_FALSE(decode_meta_context_request(trailing));
    auto huge_count = query("disk0", {});
    store_u32(&huge_count[4 + 5], 0xffffffffu);   // 4 billion queries in 0 bytes
    CHECK_FALSE(decode_meta_context_request(huge_count));
    auto long_name = query(std::string(max_string + 1, 'n'), {});
    CHECK_FALSE(decode_meta_context_request(long_name));
    std::string long_query(max_string + 1, 'q');
    CHECK_FALSE(decode_meta_context_request(query("disk0", {long_query})));
}

TEST_CASE("LIST and SET need structured replies first") {
    Negotiation st;
    st.client.fixed_newstyle = true;
    for (auto opt : {Option::list_meta_context, Option::set_meta_context}) {
        auto r = ask(st, opt, query("disk0", {"base:allocation"}));
        REQUIRE(r.size() == 1);
        CHECK(r[0].type == rep_err_invalid);
    }
    CHECK_FALSE(st.base_allocation);
}

TEST_CASE("LIST: no query or the namespace lists base:allocation; unknown contexts are skipped") {
    auto st = structured();
    for (auto qs : {std::vector<std::string_view>{}, {"base:"}, {"base:allocation"}, {"nope:x", "base:allocation"}}) {
        auto r = ask(st, Option::list_meta_context, query("disk0", qs));
        REQUIRE(r.size() == 2);
        check_context_reply(r[0], 0);
        CHECK(r[1].type == rep_ack);
    }
    auto r = ask(st, Option::list_meta_context, query("disk0", {"qemu:dirty-bitmap:x", "base:alloc"}));
    REQUIRE(r.size() == 1);
    CHECK(r[0].type == rep_ack);
    CHECK_FALSE(st.base_allocation);   // LIST never selects
}

TEST_CASE("SET selects base:allocation for its export only; a later SET replaces it") {
    auto st = structured();
    auto r = ask(st, Option::set_meta_context, query("disk0", {"base:", "base:allocation", "base:allocation"}));
    REQUIRE(r.size() == 2);   // one context reply however often it was asked for
    check_context_reply(r[0]);
    CHECK(r[1].type == rep_ack);
    const auto exports = block_status_catalog();
    CHECK(block_status_negotiated(st, exports[0]));
    CHECK_FALSE(block_status_negotiated(st, exports[1]));   // GO to another export: not negotiated

    r = ask(st, Option::set_meta_context, query("disk0", {"nope:x"}));
    REQUIRE(r.size() == 1);
    CHECK(r[0].type == rep_ack);
    CHECK_FALSE(block_status_negotiated(st, exports[0]));

    r = ask(st, Option::set_meta_context, query("", {"base:allocation"}));   // "" is the default export
    REQUIRE(r.size() == 2);
    CHECK(block_status_negotiated(st, exports[1]));

    // A SET that fails replaces the selection too (with nothing).
    r = ask(st, Option::set_meta_context, query("missing", {"base:allocation"}));
    REQUIRE(r.size() == 1);
    CHECK(r[0].type == rep_err_unknown);
    CHECK_FALSE(block_status_negotiated(st, exports[1]));

    ask(st, Option::set_meta_context, query("", {"base:allocation"}));
    REQUIRE(block_status_negotiated(st, exports[1]));
    r = ask(st, Option::set_meta_context, {1, 2, 3});
    REQUIRE(r.size() == 1);
    CHECK(r[0].type == rep_err_invalid);
    CHECK_FALSE(block_status_negotiated(st, exports[1]));
}

TEST_CASE("an unknown export in LIST/SET_META_CONTEXT is named in UTF-8, whatever bytes the client sent") {
    for (auto opt : {Option::list_meta_context, Option::set_meta_context}) {
        CAPTURE(static_cast<std::uint32_t>(opt));
        auto st = structured();
        auto r = ask(st, opt, query("a\xff\x01"
                                    "b",
                                    {"base:allocation"}));
        REQUIRE(r.size() == 1);
        CHECK(r[0].type == rep_err_unknown);
        const std::string message(r[0].data.begin(), r[0].data.end());
        CHECK(nbdsched::is_utf8(message));   // the spec: an error reply's message is UTF-8
        CHECK(message == "unknown export 'a\\xff\\x01b'");
    }
}

TEST_CASE("GO reports block status only for the export SET was for") {
    auto st = structured();
    ask(st, Option::set_meta_context, query("disk0", {"base:allocation"}));
    const auto exports = block_status_catalog();
    std::vector<std::uint8_t> out;
    auto go = [&](std::string_view name) {
        auto data = encode_info_request(name, {});
        return handle_option(st, {static_cast<std::uint32_t>(Option::go), static_cast<std::uint32_t>(data.size())},
                             data, exports, out);
    };
    CHECK(go("disk0").block_status);
    CHECK_FALSE(go("default").block_status);
}

TEST_CASE("BLOCK_STATUS requests: context, length, flags and range") {
    ExportLimits l;
    l.size = 1 << 20;
    l.structured = true;
    RequestHeader h;
    h.type = static_cast<std::uint16_t>(Command::block_status);
    h.length = 4096;
    CHECK(validate_request(h, l) == err_inval);   // no context negotiated
    l.block_status = true;
    CHECK(validate_request(h, l) == 0);
    h.flags = cmd_flag_req_one;
    CHECK(validate_request(h, l) == 0);
    h.flags = cmd_flag_df;
    CHECK(validate_request(h, l) == err_inval);
    h.flags = 0;
    h.length = 0;
    CHECK(validate_request(h, l) == err_inval);
    h.length = 4096;
    h.offset = l.size - 4095;   // one byte past the end
    CHECK(validate_request(h, l) == err_inval);
    h.offset = ~0ull - 10;
    CHECK(validate_request(h, l) == err_inval);
    h.offset = 0;
    h.length = 0xffffffffu;   // larger than the export
    CHECK(validate_request(h, l) == err_inval);
}

TEST_CASE("FAST_ZERO is valid on WRITE_ZEROES only") {
    ExportLimits l;
    l.size = 1 << 20;
    RequestHeader h;
    h.length = 4096;
    h.flags = cmd_flag_fast_zero;
    h.type = static_cast<std::uint16_t>(Command::write_zeroes);
    CHECK(validate_request(h, l) == 0);
    h.type = static_cast<std::uint16_t>(Command::write);
    CHECK(validate_request(h, l) == err_inval);
    h.type = static_cast<std::uint16_t>(Command::trim);
    CHECK(validate_request(h, l) == err_inval);
}

TEST_CASE("descriptors: merged by flags, clipped to the request, empty extents skipped") {
    const std::uint32_t hz = state_hole | state_zero;
    CHECK(encode({{4096, 0}, {4096, 0}, {0, hz}, {8192, hz}}, 16384, false) ==
          std::vector<Descriptor>{{8192, 0}, {8192, hz}});
    // Clipped: the last extent ends at the request's end, nothing past it.
    CHECK(encode({{4096, 0}, {1ull << 40, hz}, {4096, 0}}, 10000, false) ==
          std::vector<Descriptor>{{4096, 0}, {5904, hz}});
    // More than 4 GiB of one kind still fits the 32-bit length: clipped first.
    CHECK(encode({{8ull << 30, hz}}, 0xffffffffu, false) == std::vector<Descriptor>{{0xffffffffu, hz}});
    CHECK(encode({}, 4096, false).empty());
    CHECK(encode({{0, 0}}, 4096, false).empty());
}

TEST_CASE("descriptors: REQ_ONE gives one extent, no longer than the request; room limits the count") {
    const std::uint32_t hz = state_hole | state_zero;
    CHECK(encode({{4096, 0}, {4096, 0}, {4096, hz}}, 65536, true) == std::vector<Descriptor>{{8192, 0}});
    CHECK(encode({{1 << 20, hz}}, 512, true) == std::vector<Descriptor>{{512, hz}});
    std::vector<BlockExtent> alternating;
    for (int i = 0; i < 10; ++i) alternating.push_back({4096, i % 2 ? hz : 0u});
    CHECK(encode(alternating, 40960, false, 3).size() == 3);
    CHECK(encode(alternating, 40960, false, 0).empty());
}

TEST_CASE("block status chunk header") {
    std::vector<std::uint8_t> out(block_status_header_size);
    REQUIRE(encode_block_status_header(out, 0x1122334455667788ull, 16) == block_status_header_size);
    CHECK(load_u32(&out[0]) == structured_reply_magic);
    CHECK(load_u16(&out[4]) == reply_flag_done);
    CHECK(load_u16(&out[6]) == chunk_block_status);
    CHECK(load_u64(&out[8]) == 0x1122334455667788ull);
    CHECK(load_u32(&out[16]) == 20);   // context id + two descriptors
    CHECK(load_u32(&out[20]) == base_allocation_id);
}
