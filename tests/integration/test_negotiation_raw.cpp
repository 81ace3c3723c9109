// Option negotiation details libnbd hides: unknown options get
// NBD_REP_ERR_UNSUP and negotiation continues, STARTTLS is refused (POLICY or
// UNSUP), unknown export names get NBD_REP_ERR_UNKNOWN, ABORT is acknowledged,
// and the old NBD_OPT_EXPORT_NAME path still opens an export; once the
// server stops, the next option is answered NBD_REP_ERR_SHUTDOWN.
#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>
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
constexpr auto k_opt_list = static_cast<std::uint32_t>(nbd::Option::list);

// Waits until the daemon logged `text` (10 s at most).
bool logged(const Daemon& d, const std::string& text) {
    for (int i = 0; i < 1000; ++i) {
        if (d.log().find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

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

TEST_CASE("a client negotiating when the server stops gets NBD_REP_ERR_SHUTDOWN to its next option") {
    if (nbdkit_mode()) return;
    Daemon d(standard_spec());
    RawClient c(d.socket_path());
    c.greet();
    c.send_option(k_opt_list, {});   // negotiating: LIST answered as ever
    auto r = c.recv_option_reply();
    while (r.type == nbd::rep_server) r = c.recv_option_reply();
    REQUIRE(r.type == nbd::rep_ack);
    RawClient idle(d.socket_path());   // greeted, then silent: must not hold the stop up
    idle.greet();

    const auto stop_began = std::chrono::steady_clock::now();
    REQUIRE(kill(d.pid(), SIGTERM) == 0);
    REQUIRE(logged(d, "shutting down ("));
    c.send_option(k_opt_list, {});
    r = c.recv_option_reply();
    CHECK(r.option == k_opt_list);
    CHECK(r.type == nbd::rep_err_shutdown);
    CHECK(c.wait_closed());   // ...then the server closes
    CHECK(idle.wait_closed());
    CHECK(d.stop(0) == 0);
    // The silent one has a second, not the 10 s handshake_timeout.
    CHECK(std::chrono::steady_clock::now() - stop_began < std::chrono::seconds(5));
}
