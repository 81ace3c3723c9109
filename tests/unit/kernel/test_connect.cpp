// `nbdsched attach`'s client side of the handshake against the real server
// on a real unix socket (no kernel): what NBD_OPT_GO reports, refusals as
// clear errors, and a socket left in transmission mode.
#include <doctest/doctest.h>

#include <array>
#include <sys/socket.h>
#include <unistd.h>

#include "config/parsers.hpp"
#include "kernel/connect.hpp"
#include "kernel/netlink.hpp"
#include "nbd/transmission.hpp"
#include "nbd/wire.hpp"
#include "server_fixture.hpp"

using namespace nbdsched;
using namespace nbdsched::testing;

namespace {

kernel::Target target(const TestServer& server, const std::string& name) {
    kernel::Target t;
    t.unix_path = server.socket();
    t.export_name = name;
    return t;
}

constexpr std::chrono::milliseconds k_timeout{5000};

}   // namespace

TEST_CASE("NBD_OPT_GO reports size, flags and block sizes, and leaves the socket in transmission") {
    TestServer server(standard_config());
    std::string error;
    auto c = kernel::connect_export(target(server, "default"), k_timeout, error);
    REQUIRE_MESSAGE(c, error);
    CHECK(c->info.size == (16u << 20));
    CHECK((c->info.flags & nbd::tflag_has_flags) != 0);
    CHECK((c->info.flags & nbd::tflag_read_only) == 0);
    CHECK((c->info.flags & nbd::tflag_send_flush) != 0);
    CHECK((c->info.flags & nbd::tflag_send_trim) != 0);
    CHECK((c->info.flags & nbd::tflag_can_multi_conn) != 0);
    CHECK((c->info.flags & nbd::tflag_send_df) == 0);   // no structured replies were asked for
    CHECK(c->info.min_block >= 1);
    CHECK(c->info.preferred_block >= c->info.min_block);
    CHECK(c->info.max_block >= c->info.preferred_block);

    // A kernel would now send requests: a FLUSH gets a simple reply.
    nbd::RequestHeader flush;
    flush.type = static_cast<std::uint16_t>(nbd::Command::flush);
    flush.cookie = 77;
    auto request = nbd::encode_request(flush);
    REQUIRE(::send(c->socket.get(), request.data(), request.size(), MSG_NOSIGNAL) == ssize_t(request.size()));
    std::array<std::uint8_t, nbd::simple_reply_size> reply{};
    REQUIRE(::recv(c->socket.get(), reply.data(), reply.size(), MSG_WAITALL) == ssize_t(reply.size()));
    CHECK(nbd::load_u32(reply.data()) == nbd::simple_reply_magic);
    CHECK(nbd::load_u32(reply.data() + 4) == 0);
    CHECK(nbd::load_u64(reply.data() + 8) == 77);

    // The read-only export says so; the empty name is the default export.
    auto ro = kernel::connect_export(target(server, "ro"), k_timeout, error);
    REQUIRE_MESSAGE(ro, error);
    CHECK((ro->info.flags & nbd::tflag_read_only) != 0);
    auto dflt = kernel::connect_export(target(server, ""), k_timeout, error);
    REQUIRE_MESSAGE(dflt, error);
    CHECK(dflt->info.size == (16u << 20));
}

TEST_CASE("refusals and unreachable servers are errors that say why") {
    TestServer server(standard_config());
    std::string error;
    CHECK_FALSE(kernel::connect_export(target(server, "no-such-export"), k_timeout, error));
    CHECK(error.find("no-such-export") != std::string::npos);
    CHECK(error.find("NBD_REP_ERR_UNKNOWN") != std::string::npos);

    auto missing = target(server, "default");
    missing.unix_path = server.dir() + "/absent.sock";
    CHECK_FALSE(kernel::connect_export(missing, k_timeout, error));
    CHECK(error.find("connect " + missing.unix_path) != std::string::npos);

    // After the server stops, a reconnect fails instead of hanging.
    server.stop();
    CHECK_FALSE(kernel::connect_export(target(server, "default"), k_timeout, error));
    CHECK_FALSE(error.empty());
}

TEST_CASE("command-line values: HOST:PORT and /dev/nbdN") {
    // --tcp takes the listeners' HOST:PORT syntax (config's parser).
    std::string error;
    using nbdsched::config::detail::parse_host_port;
    auto v4 = parse_host_port("127.0.0.1:10809", error);
    REQUIRE(v4);
    CHECK(v4->host == "127.0.0.1");
    CHECK(v4->port == 10809);
    auto v6 = parse_host_port("[::1]:7", error);
    REQUIRE(v6);
    CHECK(v6->host == "::1");
    CHECK_FALSE(parse_host_port("localhost", error));
    CHECK_FALSE(parse_host_port("h:0", error));
    CHECK_FALSE(parse_host_port("h:70000", error));
    CHECK(kernel::parse_device("/dev/nbd0") == 0u);
    CHECK(kernel::parse_device("/dev/nbd15") == 15u);
    CHECK_FALSE(kernel::parse_device("/dev/sda"));
    CHECK_FALSE(kernel::parse_device("/dev/nbd"));
    CHECK_FALSE(kernel::parse_device("/dev/nbd1p1"));
}
