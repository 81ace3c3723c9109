// exports[].allow (who may open an export) and the unix listener's mode,
// owner and group: what loads, and the errors with their positions.
#include "helpers.hpp"

using namespace nbdsched::config;
using namespace nbdsched::config::test;

namespace {

const char* devices = "devices:\n  - {name: d0, size: 1GiB}\n";

}   // namespace

TEST_CASE("allow: one key per rule, names resolved to ids") {
    auto r = load(std::string(devices) + R"(exports:
  - name: e0
    device: d0
    allow:
      - uid: 1000
      - gid: 100
      - user: root
      - group: root
      - user: "4242"
      - cgroup: /machine.slice/vm1.scope
      - address: 10.0.0.0/8
      - address: "fd00::/8"
      - tls_identity: alice
  - {name: e1, device: d0}
)");
    INFO(all_errors(r));
    REQUIRE(r.config);
    const auto& allow = r.config->exports[0].allow;
    REQUIRE(allow.size() == 9);
    CHECK(allow[0].uid == 1000u);
    CHECK(allow[1].gid == 100u);
    CHECK(allow[2].uid == 0u);
    CHECK(allow[2].text == "user: root");
    CHECK(allow[3].gid == 0u);
    CHECK(allow[4].uid == 4242u);
    CHECK(allow[5].cgroup == std::string("/machine.slice/vm1.scope"));
    CHECK(allow[6].address == std::string("10.0.0.0/8"));
    CHECK(allow[7].address == std::string("fd00::/8"));
    CHECK(allow[8].tls_identity == std::string("alice"));
    CHECK(allow[8].origin.line == 15);
    CHECK(r.config->exports[1].allow.empty());   // no allow: everyone
}

TEST_CASE("allow: bad values, empty rules, two keys in one rule, an empty list") {
    auto r = load(std::string(devices) + R"(exports:
  - name: e0
    device: d0
    allow:
      - user: no-such-user-here
      - group: no-such-group-here
      - address: 10.0.0.0/33
      - address: 10.0.0.300
      - {}
      - {uid: 1, gid: 2}
      - cgroup: machine.slice
      - tls_identity: ""
      - uid: -1
      - host: 10.0.0.1
  - name: e1
    device: d0
    allow: []
)");
    expect_error(r, "exports[0].allow[0].user", 7, 15, "unknown user 'no-such-user-here'");
    expect_error(r, "exports[0].allow[1].group", 8, 16, "unknown group 'no-such-group-here'");
    expect_error(r, "exports[0].allow[2].address", 9, 18, "expected an IP address or CIDR block");
    expect_error(r, "exports[0].allow[3].address", 10, 18, "got '10.0.0.300'");
    expect_error(r, "exports[0].allow[4]", 11, 9, "empty rule");
    expect_error(r, "exports[0].allow[5].gid", 12, 23, "one key per rule");
    expect_error(r, "exports[0].allow[6].cgroup", 13, 17, "starts with '/'");
    expect_error(r, "exports[0].allow[7].tls_identity", 14, 23, "empty TLS identity");
    expect_error(r, "exports[0].allow[8].uid", 15, 14, "expected a whole number");
    expect_error(r, "exports[0].allow[9].host", 16, 9, "unknown key");
    expect_error(r, "exports[1].allow", 19, 12, "remove the key to admit everyone");
    for (const auto& e : r.errors) CHECK(e.key != "exports[0].allow[9]");   // the unknown key is the one error
}

TEST_CASE("listen: a unix socket's mode, owner and group") {
    auto r = load(R"(listen:
  - unix: /tmp/a.sock
    mode: "0660"
    owner: root
    group: "0"
  - {unix: /tmp/b.sock, mode: 600}
  - unix: /tmp/c.sock
)" + std::string(minimal_tail));
    INFO(all_errors(r));
    REQUIRE(r.config);
    const auto& l = r.config->listen;
    REQUIRE(l.size() == 3);
    CHECK(l[0].mode == 0660u);
    CHECK(l[0].owner == 0u);
    CHECK(l[0].group == 0u);
    CHECK(l[1].mode == 0600u);
    CHECK_FALSE(l[1].owner);
    CHECK_FALSE(l[2].mode);   // unset: as bind() leaves it

    r = load(R"(listen:
  - {unix: /tmp/a.sock, mode: "0999"}
  - {unix: /tmp/b.sock, mode: rw-rw----}
  - {unix: /tmp/c.sock, mode: "04755"}
  - {unix: /tmp/d.sock, owner: no-such-user-here}
  - {unix: /tmp/e.sock, group: no-such-group-here}
  - {tcp: "127.0.0.1:10809", mode: "0660"}
)" + std::string(minimal_tail));
    expect_error(r, "listen[0].mode", 2, 31, "expected an octal mode");
    expect_error(r, "listen[1].mode", 3, 31, "expected an octal mode");
    expect_error(r, "listen[2].mode", 4, 31, "expected an octal mode");
    expect_error(r, "listen[3].owner", 5, 32, "unknown user 'no-such-user-here'");
    expect_error(r, "listen[4].group", 6, 32, "unknown group 'no-such-group-here'");
    expect_error(r, "listen[5].mode", 7, 36, "for unix sockets");
}

TEST_CASE("cgroup paths that the kernel never shows are refused, in allow: and rules:") {
    for (std::string path : {"/a//b", "/a/./b", "/a/../b", "/a/b/..", "//a", "/."}) {
        CAPTURE(path);
        auto r = load(std::string(devices) + "exports:\n  - {name: e0, device: d0, allow: [{cgroup: \"" + path +
                      "\"}]}\nrules:\n  - {match: {cgroup: \"" + path + "\"}, group: default}\n");
        expect_error(r, "exports[0].allow[0].cgroup", 4, 45, "has an empty, '.' or '..' component");
        expect_error(r, "rules[0].match.cgroup", 6, 22, "never match");
    }
    for (std::string path : {"/", "/a/", "/tenants.slice/a.scope", "/a/b//", "/a.b/..c"}) {
        CAPTURE(path);
        auto r = load(std::string(devices) + "exports:\n  - {name: e0, device: d0, allow: [{cgroup: \"" + path +
                      "\"}]}\n");
        INFO(all_errors(r));
        CHECK(r.config.has_value());
    }
}
