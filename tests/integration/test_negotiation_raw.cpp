// Option negotiation details libnbd hides: unknown options get
// NBD_REP_ERR_UNSUP and negotiation continues, STARTTLS is refused (POLICY or
// UNSUP), unknown export names get NBD_REP_ERR_UNKNOWN, ABORT is acknowledged,
// and the old NBD_OPT_EXPORT_NAME path still opens an export.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "nbd/wire.hpp"
#include "raw_client.hpp"

using namespace nbdsched;
using namespace nbdsched::testlib;

namespace {

constexpr auto k_opt_abort = static_cast<std::uint32_t>(nbd::Option::abort);
constexpr auto k_opt_starttls = static_cast<std::uint32_t>(nbd::Option::starttls);
constexpr auto k_opt_info = static_cast<std::uint32_t>(nbd::Option::info);

}   // namespace

TEST_CASE("unknown option, STARTTLS and unknown export are refused; negotiation goes on") {
    Daemon d(standard_spec());
    {
        RawClient c(d.socket_path());
        std::uint16_t flags = c.greet();
        CHECK((flags & 1) == 1);   // NBD_FLAG_FIXED_NEWSTYLE

        c.send_option(0x77, {1, 2, 3});
        auto r = c.recv_option_reply();
        CHECK(r.option == 0x77);
        CHECK(r.type == nbd::rep_err_unsup);

        c.send_option(k_opt_starttls, {});
        r = c.recv_option_reply();
        CHECK(r.option == k_opt_starttls);
        CHECK((r.type == nbd::rep_err_policy || r.type == nbd::rep_err_unsup));

        if (!nbdkit_mode()) {
            c.send_option(k_opt_info, nbd::encode_info_request("no-such-export", {}));
            r = c.recv_option_reply();
            CHECK(r.type == nbd::rep_err_unknown);
        }

        // INFO on a real export: NBD_INFO_EXPORT (type 0) with the size, then ACK.
        c.send_option(k_opt_info, nbd::encode_info_request("default", {}));
        bool saw_export = false;
        for (r = c.recv_option_reply(); r.type == nbd::rep_info; r = c.recv_option_reply()) {
            REQUIRE(r.data.size() >= 2);
            if (nbd::load_u16(r.data.data()) == nbd::info_export) {
                REQUIRE(r.data.size() == 12);
                CHECK(nbd::load_u64(r.data.data() + 2) == (64ull << 20));
                saw_export = true;
            }
        }
        CHECK(r.type == nbd::rep_ack);
        CHECK(saw_export);

        c.send_option(k_opt_abort, {});
        // The server should acknowledge ABORT, then close.
        CHECK(c.wait_closed());
    }
    {
        RawClient c(d.socket_path());
        CHECK(c.open_export("default") == (64ull << 20));
        c.send(RawClient::request(READ, 1, 4096, 4096));
        CHECK(c.recv_simple_reply(1) == 0);
        CHECK(c.recv(4096).size() == 4096);
    }
    CHECK(d.stop() == 0);
}
