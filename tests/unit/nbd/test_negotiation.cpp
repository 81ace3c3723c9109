#include <doctest/doctest.h>

#include "nbd/meta_context.hpp"
#include "nbd/negotiation.hpp"
#include "nbd/wire.hpp"
#include "option_replies.hpp"

using namespace nbdsched::nbd;
using nbdsched::nbd::test::replies;

namespace {

std::vector<ExportInfo> negotiation_catalog() {
    ExportInfo a;
    a.name = "disk0";
    a.description = "first disk";
    a.size = 1 << 20;
    a.flags = tflag_has_flags | tflag_send_flush;
    ExportInfo b;
    b.name = "default";
    b.size = 4096;
    return {a, b};
}

Negotiation fixed() {
    Negotiation n;
    n.client.fixed_newstyle = true;
    return n;
}

OptionResult run(Negotiation& st, Option opt, const std::vector<std::uint8_t>& data,
                 std::vector<std::uint8_t>& out) {
    auto exports = negotiation_catalog();
    static std::vector<ExportInfo> keep;
    keep = exports;
    return handle_option(st, {static_cast<std::uint32_t>(opt), static_cast<std::uint32_t>(data.size())}, data,
                         keep, out);
}

}   // namespace

TEST_CASE("empty name picks the export named default, else the first") {
    auto exports = negotiation_catalog();
    CHECK(find_export(exports, "")->name == "default");
    CHECK(find_export(exports, "disk0")->name == "disk0");
    CHECK(find_export(exports, "nope") == nullptr);
    exports.pop_back();
    CHECK(find_export(exports, "")->name == "disk0");
    CHECK(find_export({}, "") == nullptr);
}

TEST_CASE("LIST answers one SERVER per export then ACK; with data it is INVALID") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    auto r = run(st, Option::list, {}, out);
    CHECK(r.next == Next::more_options);
    auto all = replies(out);
    REQUIRE(all.size() == 3);
    CHECK(all[0].type == rep_server);
    CHECK(load_u32(all[0].data.data()) == 5);
    CHECK(std::string(all[0].data.begin() + 4, all[0].data.end()) == "disk0first disk");
    CHECK(all[2].type == rep_ack);
    out.clear();
    run(st, Option::list, {1}, out);
    all = replies(out);
    REQUIRE(all.size() == 1);
    CHECK(all[0].type == rep_err_invalid);
}

TEST_CASE("INFO answers EXPORT, requested NAME/DESCRIPTION, BLOCK_SIZE, ACK and stays in options") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    std::uint16_t infos[] = {info_name, info_description, info_block_size};
    auto r = run(st, Option::info, encode_info_request("disk0", infos), out);
    CHECK(r.next == Next::more_options);
    auto all = replies(out);
    REQUIRE(all.size() == 5);
    CHECK(load_u16(all[0].data.data()) == info_export);
    CHECK(load_u64(all[0].data.data() + 2) == (1u << 20));
    CHECK(load_u16(all[1].data.data()) == info_name);
    CHECK(std::string(all[1].data.begin() + 2, all[1].data.end()) == "disk0");
    CHECK(load_u16(all[2].data.data()) == info_description);
    CHECK(load_u16(all[3].data.data()) == info_block_size);
    CHECK(all[3].data.size() == 14);
    CHECK(all[4].type == rep_ack);
}

TEST_CASE("GO enters transmission; SEND_DF only with structured replies") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    auto r = run(st, Option::go, encode_info_request("disk0", {}), out);
    CHECK(r.next == Next::transmission);
    REQUIRE(r.chosen);
    CHECK(r.chosen->name == "disk0");
    CHECK((r.transmission_flags & tflag_send_df) == 0);
    CHECK((r.transmission_flags & tflag_has_flags) != 0);

    auto st2 = fixed();
    out.clear();
    run(st2, Option::structured_reply, {}, out);
    CHECK(st2.structured_replies);
    CHECK(replies(out).at(0).type == rep_ack);
    out.clear();
    r = run(st2, Option::go, encode_info_request("", {}), out);
    CHECK(r.next == Next::transmission);
    CHECK(r.chosen->name == "default");
    CHECK((r.transmission_flags & tflag_send_df) != 0);
}

TEST_CASE("GO on an unknown export is ERR_UNKNOWN and negotiation continues") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    auto r = run(st, Option::go, encode_info_request("nope", {}), out);
    CHECK(r.next == Next::more_options);
    auto all = replies(out);
    REQUIRE(all.size() == 1);
    CHECK(all[0].type == rep_err_unknown);
}

TEST_CASE("malformed GO payload is ERR_INVALID") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    auto r = run(st, Option::go, {0, 0, 0, 9, 'a'}, out);
    CHECK(r.next == Next::more_options);
    CHECK(replies(out).at(0).type == rep_err_invalid);
}

TEST_CASE("unknown options are ERR_UNSUP, STARTTLS without TLS is ERR_POLICY, ABORT acks and closes") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    auto r = handle_option(st, {999, 0}, {}, {}, out);
    CHECK(r.next == Next::more_options);
    CHECK(replies(out).at(0).type == rep_err_unsup);
    out.clear();
    run(st, Option::peek_export, {}, out);
    CHECK(replies(out).at(0).type == rep_err_unsup);
    out.clear();
    run(st, Option::set_meta_context, {}, out);   // known, but structured replies come first
    CHECK(replies(out).at(0).type == rep_err_invalid);
    out.clear();
    run(st, Option::starttls, {}, out);
    CHECK(replies(out).at(0).type == rep_err_policy);
    out.clear();
    r = run(st, Option::abort, {}, out);
    CHECK(r.next == Next::close);
    CHECK(r.graceful);
    CHECK(replies(out).at(0).type == rep_ack);
}

TEST_CASE("EXPORT_NAME: known export enters transmission, unknown closes") {
    auto st = fixed();
    st.client.no_zeroes = true;
    std::vector<std::uint8_t> out;
    std::string name = "disk0";
    auto r = run(st, Option::export_name, {name.begin(), name.end()}, out);
    CHECK(r.next == Next::transmission);
    REQUIRE(out.size() == export_name_reply_size);
    CHECK(load_u64(out.data()) == (1u << 20));
    out.clear();
    name = "nope";
    r = run(st, Option::export_name, {name.begin(), name.end()}, out);
    CHECK(r.next == Next::close);
    CHECK(out.empty());
}

TEST_CASE("non-fixed-newstyle clients may only send EXPORT_NAME") {
    Negotiation st;
    std::vector<std::uint8_t> out;
    auto r = run(st, Option::list, {}, out);
    CHECK(r.next == Next::close);
    CHECK(out.empty());
    r = run(st, Option::export_name, {}, out);
    CHECK(r.next == Next::transmission);
    CHECK(out.size() == export_name_reply_size + export_name_zeroes);
}

TEST_CASE("an option loop is cut off") {
    auto st = fixed();
    std::vector<std::uint8_t> out;
    OptionResult r;
    unsigned n = 0;
    do {
        out.clear();
        r = run(st, Option::structured_reply, {}, out);
        ++n;
    } while (r.next == Next::more_options && n < 10 * max_options);
    CHECK(r.next == Next::close);
    CHECK(n == max_options + 1);
}

TEST_CASE("an export the client may not open: hidden from LIST, ERR_POLICY for INFO/GO/meta contexts") {
    auto st = fixed();
    st.may_open = [](const ExportInfo& e) { return e.name != "disk0"; };
    std::vector<std::uint8_t> out;
    run(st, Option::list, {}, out);
    auto all = replies(out);
    REQUIRE(all.size() == 2);   // "default", then ACK
    CHECK(std::string(all[0].data.begin() + 4, all[0].data.end()) == "default");
    CHECK(all[1].type == rep_ack);
    for (auto opt : {Option::info, Option::go}) {
        out.clear();
        auto r = run(st, opt, encode_info_request("disk0", {}), out);
        CHECK(r.next == Next::more_options);   // the spec lets the client try another option
        REQUIRE(r.refused);
        CHECK(r.refused->name == "disk0");
        all = replies(out);
        REQUIRE(all.size() == 1);
        CHECK(all[0].type == rep_err_policy);
        CHECK(std::string(all[0].data.begin(), all[0].data.end()).find("denied by policy") != std::string::npos);
    }
    out.clear();
    run(st, Option::structured_reply, {}, out);
    out.clear();
    std::string_view query = "base:allocation";
    auto r = run(st, Option::set_meta_context, encode_meta_context_request("disk0", {&query, 1}), out);
    CHECK_FALSE(r.refused);   // counted once, at GO
    CHECK(replies(out).at(0).type == rep_err_policy);
    out.clear();
    r = run(st, Option::go, encode_info_request("", {}), out);   // the allowed default still opens
    CHECK(r.next == Next::transmission);
    CHECK(r.chosen->name == "default");
    CHECK_FALSE(r.refused);
}

TEST_CASE("EXPORT_NAME to an export the client may not open closes without a reply") {
    auto st = fixed();
    st.may_open = [](const ExportInfo&) { return false; };
    std::vector<std::uint8_t> out;
    std::string name = "disk0";
    auto r = run(st, Option::export_name, {name.begin(), name.end()}, out);
    CHECK(r.next == Next::close);
    REQUIRE(r.refused);
    CHECK(r.refused->name == "disk0");
    CHECK(r.reason.find("denied by policy") != std::string::npos);
    CHECK(out.empty());
}

TEST_CASE("while the server shuts down: every option but ABORT is ERR_SHUTDOWN and closes") {
    for (auto opt : {Option::list, Option::go, Option::info, Option::structured_reply, Option::starttls}) {
        CAPTURE(static_cast<int>(opt));
        auto st = fixed();
        st.shutting_down = true;
        std::vector<std::uint8_t> out;
        auto r = run(st, opt, encode_info_request("disk0", {}), out);
        CHECK(r.next == Next::close);
        CHECK(r.graceful);
        auto all = replies(out);
        REQUIRE(all.size() == 1);
        CHECK(all[0].type == rep_err_shutdown);
        CHECK(all[0].option == static_cast<std::uint32_t>(opt));
    }
    auto st = fixed();
    st.shutting_down = true;
    std::vector<std::uint8_t> out;
    auto r = run(st, Option::abort, {}, out);   // the client's own goodbye is acknowledged as ever
    CHECK(r.next == Next::close);
    CHECK(replies(out).at(0).type == rep_ack);
    out.clear();
    std::string name = "disk0";   // EXPORT_NAME has no error reply: closed without one
    r = run(st, Option::export_name, {name.begin(), name.end()}, out);
    CHECK(r.next == Next::close);
    CHECK(out.empty());
}
