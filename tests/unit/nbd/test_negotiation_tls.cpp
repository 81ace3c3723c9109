// NBD_OPT_STARTTLS and the TLS-only listener (tls: require) in the pure
// option state machine; the TLS handshake itself is the caller's.
#include <doctest/doctest.h>

#include "nbd/negotiation.hpp"
#include "nbd/wire.hpp"
#include "option_replies.hpp"

using namespace nbdsched::nbd;

namespace {

const std::vector<ExportInfo>& tls_catalog() {
    static const std::vector<ExportInfo> exports = [] {
        ExportInfo a;
        a.name = "disk0";
        a.description = "secret name";
        a.size = 1 << 20;
        return std::vector<ExportInfo>{a};
    }();
    return exports;
}

Negotiation with_tls(TlsMode mode) {
    Negotiation n;
    n.client.fixed_newstyle = true;
    n.tls = mode;
    return n;
}

struct Outcome {
    OptionResult result;
    std::vector<OptionReply> replies;
};

Outcome send(Negotiation& st, Option opt, const std::vector<std::uint8_t>& data = {}) {
    std::vector<std::uint8_t> out;
    Outcome o;
    o.result = handle_option(st, {static_cast<std::uint32_t>(opt), static_cast<std::uint32_t>(data.size())}, data,
                             tls_catalog(), out);
    o.replies = test::replies(out);
    return o;
}

std::vector<std::uint8_t> go_payload(const std::string& name) {
    return encode_info_request(name, {});
}

}   // namespace

TEST_CASE("tls off: STARTTLS is ERR_POLICY and everything else works in plaintext") {
    auto st = with_tls(TlsMode::off);
    auto o = send(st, Option::starttls);
    CHECK(o.result.next == Next::more_options);
    REQUIRE(o.replies.size() == 1);
    CHECK(o.replies[0].type == rep_err_policy);
    CHECK(send(st, Option::go, go_payload("disk0")).result.next == Next::transmission);
}

TEST_CASE("tls require: nothing but STARTTLS and ABORT before TLS, no export leaks") {
    auto st = with_tls(TlsMode::require);
    for (auto opt : {Option::list, Option::info, Option::go, Option::structured_reply, Option::set_meta_context}) {
        auto o = send(st, opt, opt == Option::info || opt == Option::go ? go_payload("disk0") : std::vector<std::uint8_t>{});
        CAPTURE(option_name(static_cast<std::uint32_t>(opt)));
        CHECK(o.result.next == Next::more_options);
        REQUIRE(o.replies.size() == 1);
        CHECK(o.replies[0].type == rep_err_tls_reqd);
    }
    CHECK_FALSE(st.structured_replies);
    std::string name = "disk0";
    auto o = send(st, Option::export_name, {name.begin(), name.end()});
    CHECK(o.result.next == Next::close);
    CHECK(o.replies.empty());

    auto abort_st = with_tls(TlsMode::require);
    o = send(abort_st, Option::abort);
    CHECK(o.result.next == Next::close);
    CHECK(o.result.graceful);
}

TEST_CASE("STARTTLS: ACK then handshake; plaintext state forgotten; then options work; no second STARTTLS") {
    auto st = with_tls(TlsMode::on);
    send(st, Option::structured_reply);
    REQUIRE(st.structured_replies);
    auto o = send(st, Option::starttls, {1});
    CHECK(o.replies.at(0).type == rep_err_invalid);   // takes no data
    o = send(st, Option::starttls);
    CHECK(o.result.next == Next::starttls);
    REQUIRE(o.replies.size() == 1);
    CHECK(o.replies[0].type == rep_ack);
    CHECK_FALSE(st.structured_replies);
    st.tls_active = true;   // what the connection does after its handshake
    o = send(st, Option::starttls);
    CHECK(o.result.next == Next::more_options);
    CHECK(o.replies.at(0).type == rep_err_invalid);
    CHECK(send(st, Option::list).replies.size() == 2);   // the export, then ACK
    CHECK(send(st, Option::go, go_payload("disk0")).result.next == Next::transmission);
}

TEST_CASE("tls require: after the handshake EXPORT_NAME and GO work") {
    auto st = with_tls(TlsMode::require);
    CHECK(send(st, Option::starttls).result.next == Next::starttls);
    st.tls_active = true;
    std::string name = "disk0";
    std::vector<std::uint8_t> data(name.begin(), name.end()), out;
    auto r = handle_option(st, {static_cast<std::uint32_t>(Option::export_name), 5}, data, tls_catalog(), out);
    CHECK(r.next == Next::transmission);
    CHECK(out.size() == export_name_reply_size + export_name_zeroes);   // not an option reply
}

TEST_CASE("the option limit is the state's, not only the default") {
    auto st = with_tls(TlsMode::off);
    st.max_options = 3;
    for (int i = 0; i < 3; ++i) CHECK(send(st, Option::structured_reply).result.next == Next::more_options);
    auto o = send(st, Option::structured_reply);
    CHECK(o.result.next == Next::close);
    CHECK(o.result.reason == "too many options");
}
