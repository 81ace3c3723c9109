// daemon/tenancy/access: an export's allow: rules against a peer (pure), and
// the peer's supplementary groups from a real socket pair.
#include <doctest/doctest.h>
#include <algorithm>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/tenancy/access.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;

namespace {

PeerInfo unix_peer(std::uint32_t uid, std::uint32_t gid, std::vector<std::uint32_t> groups = {},
                   std::string cgroup = "") {
    PeerInfo p;
    p.is_unix = true;
    p.pid = 42;
    p.uid = uid;
    p.gid = gid;
    p.groups = std::move(groups);
    p.cgroup = std::move(cgroup);
    return p;
}

PeerInfo tcp_peer(std::string address) {
    PeerInfo p;
    p.address = std::move(address);
    return p;
}

template <class F>
config::AllowRule rule(F set) {
    config::AllowRule r;
    set(r);
    return r;
}

}   // namespace

TEST_CASE("uid and gid rules: the primary group or a supplementary one") {
    auto uid = rule([](auto& r) { r.uid = 1000; });
    auto gid = rule([](auto& r) { r.gid = 27; });
    CHECK(allow_rule_matches(uid, unix_peer(1000, 1000)));
    CHECK_FALSE(allow_rule_matches(uid, unix_peer(1001, 1000)));
    CHECK_FALSE(allow_rule_matches(uid, tcp_peer("127.0.0.1")));   // a TCP peer has no uid
    CHECK(allow_rule_matches(gid, unix_peer(1000, 27)));
    CHECK(allow_rule_matches(gid, unix_peer(1000, 1000, {4, 27, 100})));
    CHECK_FALSE(allow_rule_matches(gid, unix_peer(1000, 1000, {4, 100})));
    CHECK_FALSE(allow_rule_matches(gid, tcp_peer("127.0.0.1")));
}

TEST_CASE("cgroup rules match the cgroup and everything below it") {
    auto cg = rule([](auto& r) { r.cgroup = "/machine.slice/vm1.scope"; });
    CHECK(allow_rule_matches(cg, unix_peer(0, 0, {}, "/machine.slice/vm1.scope")));
    CHECK(allow_rule_matches(cg, unix_peer(0, 0, {}, "/machine.slice/vm1.scope/emulator")));
    CHECK_FALSE(allow_rule_matches(cg, unix_peer(0, 0, {}, "/machine.slice/vm1.scope2")));
    CHECK_FALSE(allow_rule_matches(cg, unix_peer(0, 0, {}, "/machine.slice")));
    CHECK_FALSE(allow_rule_matches(cg, unix_peer(0, 0)));   // cgroup unknown: no match
}

TEST_CASE("address rules: IPv4 and IPv6 CIDR, mapped IPv4, never a unix peer") {
    auto v4 = rule([](auto& r) { r.address = "10.0.0.0/8"; });
    auto v6 = rule([](auto& r) { r.address = "fd00::/8"; });
    auto host = rule([](auto& r) { r.address = "127.0.0.1"; });
    CHECK(allow_rule_matches(v4, tcp_peer("10.1.2.3")));
    CHECK(allow_rule_matches(v4, tcp_peer("::ffff:10.1.2.3")));
    CHECK_FALSE(allow_rule_matches(v4, tcp_peer("11.0.0.1")));
    CHECK_FALSE(allow_rule_matches(v4, tcp_peer("127.0.0.1")));
    CHECK(allow_rule_matches(v6, tcp_peer("fd12::1")));
    CHECK_FALSE(allow_rule_matches(v6, tcp_peer("fe80::1")));
    CHECK_FALSE(allow_rule_matches(v6, tcp_peer("10.1.2.3")));
    CHECK(allow_rule_matches(host, tcp_peer("127.0.0.1")));
    CHECK_FALSE(allow_rule_matches(host, tcp_peer("127.0.0.2")));
    CHECK_FALSE(allow_rule_matches(v4, unix_peer(0, 0)));
    CHECK_FALSE(allow_rule_matches(v4, tcp_peer("")));
}

TEST_CASE("tls_identity rules need the TLS session's identity") {
    auto alice = rule([](auto& r) { r.tls_identity = "alice"; });
    auto peer = tcp_peer("192.0.2.1");
    CHECK_FALSE(allow_rule_matches(alice, peer));   // no TLS: no identity
    peer.tls_identity = "bob";
    CHECK_FALSE(allow_rule_matches(alice, peer));
    peer.tls_identity = "alice";
    CHECK(allow_rule_matches(alice, peer));
    auto over_unix = unix_peer(1000, 1000);
    over_unix.tls_identity = "alice";
    CHECK(allow_rule_matches(alice, over_unix));
    CHECK(over_unix.describe().find("tls alice") != std::string::npos);
}

TEST_CASE("any one rule admits; no rules admit everyone; a rule with nothing set admits nobody") {
    std::vector<config::AllowRule> allow{rule([](auto& r) { r.uid = 1000; }),
                                         rule([](auto& r) { r.address = "127.0.0.0/8"; })};
    CHECK(allowed({}, tcp_peer("192.0.2.1")));
    CHECK(allowed(allow, unix_peer(1000, 1000)));
    CHECK(admitting_rule(allow, tcp_peer("127.0.0.5")) == &allow[1]);
    CHECK_FALSE(allowed(allow, unix_peer(1001, 1000)));
    CHECK_FALSE(allowed(allow, tcp_peer("192.0.2.1")));
    CHECK_FALSE(allowed({config::AllowRule{}}, unix_peer(0, 0)));
}

TEST_CASE("peer_info reads our own uid, gid and supplementary groups from a socket pair") {
    int fds[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    auto p = peer_info(fds[0]);
    ::close(fds[0]);
    ::close(fds[1]);
    CHECK(p.is_unix);
    CHECK(p.uid == static_cast<std::uint32_t>(::getuid()));
    CHECK(p.gid == static_cast<std::uint32_t>(::getgid()));
    std::vector<gid_t> mine(static_cast<std::size_t>(::getgroups(0, nullptr)));
    mine.resize(static_cast<std::size_t>(::getgroups(static_cast<int>(mine.size()), mine.data())));
    CHECK(p.groups.size() == mine.size());
    for (auto g : mine) CHECK(std::find(p.groups.begin(), p.groups.end(), g) != p.groups.end());
}
