// Option negotiation details libnbd hides: unknown options get
// NBD_REP_ERR_UNSUP and negotiation continues, STARTTLS is refused (POLICY or
// UNSUP), unknown export names get NBD_REP_ERR_UNKNOWN, ABORT is acknowledged,
// and the old NBD_OPT_EXPORT_NAME path still opens an export.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "harness.hpp"
#include "raw_client.hpp"

using namespace nbdsched::itest;

namespace {

constexpr std::uint64_t k_reply_magic = 0x3e889045565a9ull;
constexpr std::uint32_t k_rep_ack = 1;
constexpr std::uint32_t k_rep_info = 3;
constexpr std::uint32_t k_err_unsup = 0x80000001u;
constexpr std::uint32_t k_err_policy = 0x80000002u;
constexpr std::uint32_t k_err_unknown = 0x80000006u;
constexpr std::uint32_t k_opt_abort = 2;
constexpr std::uint32_t k_opt_starttls = 5;
constexpr std::uint32_t k_opt_info = 6;

void send_option(RawConn& c, std::uint32_t option, const std::vector<std::uint8_t>& data) {
    std::vector<std::uint8_t> o;
    put_be(o, nbd::k_opt_magic, 8);
    put_be(o, option, 4);
    put_be(o, data.size(), 4);
    o.insert(o.end(), data.begin(), data.end());
    c.send(o);
}

struct OptReply {
    std::uint32_t option;
    std::uint32_t type;
    std::vector<std::uint8_t> data;
};

OptReply recv_reply(RawConn& c) {
    auto h = c.recv(20);
    REQUIRE(get_be(h.data(), 8) == k_reply_magic);
    OptReply r{static_cast<std::uint32_t>(get_be(h.data() + 8, 4)),
               static_cast<std::uint32_t>(get_be(h.data() + 12, 4)), {}};
    r.data = c.recv(get_be(h.data() + 16, 4));
    return r;
}

// NBD_OPT_INFO/GO payload: export name, no information requests.
std::vector<std::uint8_t> info_request(const std::string& name) {
    std::vector<std::uint8_t> d;
    put_be(d, name.size(), 4);
    d.insert(d.end(), name.begin(), name.end());
    put_be(d, 0, 2);
    return d;
}

} // namespace

TEST_CASE("unknown option, STARTTLS and unknown export are refused; negotiation goes on") {
    Daemon d(standard_spec());
    {
        RawConn c(d.socket_path());
        std::uint16_t flags = c.greet();
        CHECK((flags & 1) == 1);   // NBD_FLAG_FIXED_NEWSTYLE

        send_option(c, 0x77, {1, 2, 3});
        auto r = recv_reply(c);
        CHECK(r.option == 0x77);
        CHECK(r.type == k_err_unsup);

        send_option(c, k_opt_starttls, {});
        r = recv_reply(c);
        CHECK(r.option == k_opt_starttls);
        CHECK((r.type == k_err_policy || r.type == k_err_unsup));

        if (!nbdkit_mode()) {
            send_option(c, k_opt_info, info_request("no-such-export"));
            r = recv_reply(c);
            CHECK(r.type == k_err_unknown);
        }

        // INFO on a real export: NBD_INFO_EXPORT (type 0) with the size, then ACK.
        send_option(c, k_opt_info, info_request("default"));
        bool saw_export = false;
        for (r = recv_reply(c); r.type == k_rep_info; r = recv_reply(c)) {
            REQUIRE(r.data.size() >= 2);
            if (get_be(r.data.data(), 2) == 0) {
                REQUIRE(r.data.size() == 12);
                CHECK(get_be(r.data.data() + 2, 8) == (64ull << 20));
                saw_export = true;
            }
        }
        CHECK(r.type == k_rep_ack);
        CHECK(saw_export);

        send_option(c, k_opt_abort, {});
        // The server should acknowledge ABORT, then close.
        CHECK(c.wait_closed());
    }
    {
        RawConn c(d.socket_path());
        CHECK(c.open_export("default") == (64ull << 20));
        c.send(RawConn::request(nbd::k_cmd_read, 1, 4096, 4096));
        CHECK(c.recv_simple_reply(1) == 0);
        CHECK(c.recv(4096).size() == 4096);
    }
    CHECK(d.stop() == 0);
}
