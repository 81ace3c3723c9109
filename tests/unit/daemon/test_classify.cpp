// daemon/classify: rule matching, /proc/PID/cgroup and cgroup weight parsing,
// and SO_PEERCRED on a real socket pair.
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/tenancy/access.hpp"
#include "daemon/tenancy/classify.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;

namespace {
config::Rule rule(std::string group) {
    config::Rule r;
    r.group = std::move(group);
    return r;
}
}   // namespace

TEST_CASE("/proc/PID/cgroup: the v2 line") {
    CHECK(parse_proc_cgroup("0::/user.slice/user-0.slice/session-1.scope\n") ==
          std::string("/user.slice/user-0.slice/session-1.scope"));
    CHECK(parse_proc_cgroup("12:cpu:/x\n0::/a/b\n") == std::string("/a/b"));
    CHECK(parse_proc_cgroup("0::/\n") == std::string("/"));
    CHECK_FALSE(parse_proc_cgroup("12:cpu:/x\n"));
    CHECK_FALSE(parse_proc_cgroup(""));
}

TEST_CASE("cgroup prefixes match whole path components") {
    CHECK(cgroup_matches("/tenants/a", "/tenants/a"));
    CHECK(cgroup_matches("/tenants/a", "/tenants/a/job1"));
    CHECK(cgroup_matches("/tenants/a/", "/tenants/a/job1"));
    CHECK_FALSE(cgroup_matches("/tenants/a", "/tenants/ab"));
    CHECK_FALSE(cgroup_matches("/tenants/a", "/tenants"));
    CHECK(cgroup_matches("/", "/anything"));
}

TEST_CASE("addresses: exact, CIDR, IPv6, mapped IPv4") {
    CHECK(address_matches("127.0.0.1", "127.0.0.1"));
    CHECK_FALSE(address_matches("127.0.0.1", "127.0.0.2"));
    CHECK(address_matches("10.0.0.0/8", "10.200.3.4"));
    CHECK_FALSE(address_matches("10.0.0.0/8", "11.0.0.1"));
    CHECK(address_matches("192.168.1.0/24", "::ffff:192.168.1.77"));
    CHECK(address_matches("0.0.0.0/0", "8.8.8.8"));
    CHECK(address_matches("::1", "::1"));
    CHECK(address_matches("fd00::/8", "fd12:3456::1"));
    CHECK_FALSE(address_matches("fd00::/8", "fe80::1"));
    CHECK_FALSE(address_matches("10.0.0.0/33", "10.0.0.1"));
    CHECK_FALSE(address_matches("garbage", "10.0.0.1"));
    CHECK_FALSE(address_matches("10.0.0.1", ""));
}

TEST_CASE("rules: first match wins, unset fields match anything") {
    std::vector<config::Rule> rules;
    auto by_cgroup = rule("cg");
    by_cgroup.cgroup = "/tenants/a";
    auto by_uid = rule("uid");
    by_uid.uid = 1000;
    auto by_export = rule("exp");
    by_export.export_name = "scratch";
    auto by_addr = rule("net");
    by_addr.address = "10.0.0.0/8";
    rules = {by_cgroup, by_uid, by_export, by_addr};

    PeerInfo unix_peer;
    unix_peer.is_unix = true;
    unix_peer.pid = 5;
    unix_peer.uid = 1000;
    unix_peer.gid = 1000;
    unix_peer.cgroup = "/tenants/a/fio";
    CHECK(match_rule(rules, unix_peer, "x")->group == "cg");
    unix_peer.cgroup = "/other";
    CHECK(match_rule(rules, unix_peer, "x")->group == "uid");
    unix_peer.uid = 0;
    CHECK(match_rule(rules, unix_peer, "scratch")->group == "exp");
    CHECK(match_rule(rules, unix_peer, "x") == nullptr);

    PeerInfo tcp;
    tcp.address = "10.1.2.3";
    CHECK(match_rule(rules, tcp, "x")->group == "net");
    tcp.address = "127.0.0.1";
    CHECK(match_rule(rules, tcp, "x") == nullptr);

    auto both = rule("both");
    both.uid = 0;
    both.export_name = "db";
    std::vector<config::Rule> r2 = {both, rule("everyone")};
    CHECK(match_rule(r2, unix_peer, "db")->group == "both");
    CHECK(match_rule(r2, unix_peer, "web")->group == "everyone");
}

TEST_CASE("a gid rule matches the primary group or a supplementary one, in rules: as in allow:") {
    auto by_gid = rule("kvm");
    by_gid.gid = 36;
    PeerInfo peer;
    peer.is_unix = true;
    peer.uid = 1000;
    peer.gid = 1000;
    CHECK(match_rule({by_gid}, peer, "x") == nullptr);
    peer.groups = {1000, 36, 100};   // SO_PEERGROUPS
    REQUIRE(match_rule({by_gid}, peer, "x") != nullptr);
    CHECK(match_rule({by_gid}, peer, "x")->group == "kvm");
    config::AllowRule allow;
    allow.gid = 36;
    CHECK(allow_rule_matches(allow, peer));
    peer.groups = {};
    peer.gid = 36;   // primary
    CHECK(match_rule({by_gid}, peer, "x") != nullptr);
    CHECK(allow_rule_matches(allow, peer));
    CHECK_FALSE(in_group(PeerInfo{}, 36));   // TCP: no credentials
}

TEST_CASE("cgroup weight files") {
    CHECK(parse_cgroup_weight("default 100\n") == 100u);
    CHECK(parse_cgroup_weight("default 250\n8:0 300\n") == 250u);
    CHECK(parse_cgroup_weight("500\n") == 500u);
    CHECK(parse_cgroup_weight("default 10000\n") == 1000u);
    CHECK_FALSE(parse_cgroup_weight(""));
    CHECK_FALSE(parse_cgroup_weight("default 0\n"));

    auto root = std::filesystem::temp_directory_path() / ("nbdsched-cg-" + std::to_string(::getpid()));
    std::filesystem::create_directories(root / "a" / "b");
    std::ofstream(root / "a" / "b" / "io.weight") << "default 300\n";
    CHECK(cgroup_weight("/a/b", root.string()) == 300u);
    std::ofstream(root / "a" / "b" / "io.bfq.weight") << "default 40\n";
    CHECK(cgroup_weight("/a/b", root.string()) == 40u);   // bfq's file wins
    CHECK_FALSE(cgroup_weight("/a", root.string()));
    std::filesystem::remove_all(root);
}

TEST_CASE("peer_info over a unix socket pair: our own pid, uid and cgroup") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    auto p = peer_info(sv[0]);
    CHECK(p.is_unix);
    CHECK(p.pid == ::getpid());
    CHECK(p.uid == ::getuid());
    CHECK(p.gid == ::getgid());
    std::ifstream self("/proc/self/cgroup");
    std::string text((std::istreambuf_iterator<char>(self)), {});
    if (auto cg = parse_proc_cgroup(text)) CHECK(p.cgroup == *cg);
    CHECK(p.describe().find("pid " + std::to_string(::getpid())) != std::string::npos);
    ::close(sv[0]);
    ::close(sv[1]);
}
