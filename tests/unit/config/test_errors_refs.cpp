// Names and references across sections: duplicates, unknown devices and
// groups, export windows, group weights, classification rules.
#include "helpers.hpp"

using namespace nbdsched::config;
using namespace nbdsched::config::test;

TEST_CASE("duplicate device, export and group names") {
    auto r = load(R"(devices:
  - {name: d0, size: 1GiB}
  - {name: d0, size: 2GiB}
exports:
  - {name: e0, device: d0}
  - {name: e0, device: d0}
groups:
  - {name: g, weight: 10}
  - {name: g, weight: 20}
)");
    expect_error(r, "devices[1].name", 3, 12, "duplicate device name 'd0' (first at test.yaml:2:12)");
    expect_error(r, "exports[1].name", 6, 12, "duplicate export name 'e0' (first at test.yaml:5:12)");
    expect_error(r, "groups[1].name", 9, 12, "duplicate group name 'g' (first at test.yaml:8:12)");
}

TEST_CASE("an export of an unknown device") {
    auto r = load("devices: [{name: disk0, size: 1GiB}]\nexports:\n  - {name: e0, device: disk1}\n");
    expect_error(r, "exports[0].device", 3, 24, "unknown device 'disk1' (did you mean 'disk0'?)");
    expect_error(load("devices: [{name: d0, size: 1GiB}]\nexports:\n  - {name: e0}\n"), "exports[0].device", 3, 5,
                 "missing: an export needs the device");
}

TEST_CASE("control characters in export names and descriptions are refused") {
    // YAML escapes in double quotes: a newline (a forged log line), ESC, DEL, U+0085 (NEL).
    auto r = load(R"(devices: [{name: d0, size: 1GiB}]
exports:
  - {name: "e0\n[error] forged", device: d0}
  - {name: e1, device: d0, description: "red \e[31m"}
  - {name: "e2\x7f", device: d0}
  - {name: e3, device: d0, description: "next \u0085 line"}
  - {name: "e4 ok", device: d0, description: "tab-free, ünïcode fine"}
)");
    expect_error(r, "exports[0].name", 3, 12, "a control character (U+000A) in an export name");
    expect_error(r, "exports[1].description", 4, 41, "a control character (U+001B) in a description");
    expect_error(r, "exports[2].name", 5, 12, "(U+007F)");
    expect_error(r, "exports[3].description", 6, 41, "(U+0085)");
    CHECK(r.errors.size() == 4);
}

TEST_CASE("export windows must lie inside their device") {
    auto r = load(R"(devices: [{name: d0, size: 1GiB}]
exports:
  - {name: past, device: d0, offset: 1GiB}
  - {name: long, device: d0, offset: 512MiB, size: 513MiB}
  - {name: wraps, device: d0, offset: 512MiB, size: 16383PiB}
  - {name: fits, device: d0, offset: 512MiB, size: 512MiB}
  - {name: rest, device: d0, offset: 1023MiB}
)");
    expect_error(r, "exports[0].offset", 3, 38, "offset 1GiB is at or past the end of device 'd0' (1GiB)");
    expect_error(r, "exports[1].size", 4, 52, "window 512MiB + 513MiB ends past the end of device 'd0' (1GiB)");
    // offset + size overflows 64 bits: still refused, not wrapped around.
    expect_error(r, "exports[2].size", 5, 53, "ends past the end of device 'd0'");
    CHECK(r.errors.size() == 3);
    expect_error(load("devices: [{name: d0, size: 1GiB}]\nexports: [{name: e, device: d0, size: 0}]\n"),
                 "exports[0].size", 2, 39, "above 0");
}

TEST_CASE("a file device of unknown size does not bound its exports yet") {
    auto r = load("devices: [{name: f, backend: file, path: /x}]\nexports: [{name: e, device: f, offset: 1TiB}]\n");
    INFO(all_errors(r));
    CHECK(r.config);
}

TEST_CASE("groups referenced by exports, devices and rules must exist") {
    auto r = load(R"(devices:
  - {name: d0, size: 1GiB, default_group: batch}
exports:
  - {name: e0, device: d0, group: webb}
groups:
  - {name: web, weight: 500}
rules:
  - match: {uid: 1000}
    group: nobody
)");
    expect_error(r, "devices[0].default_group", 2, 43, "unknown group 'batch'");
    expect_error(r, "exports[0].group", 4, 35, "unknown group 'webb' (did you mean 'web'?)");
    expect_error(r, "rules[0].group", 9, 12, "unknown group 'nobody'");
}

TEST_CASE("the default group exists without being declared") {
    auto r = load(std::string("rules: [{match: {}, group: default}]\n") + minimal_tail);
    INFO(all_errors(r));
    CHECK(r.config);
}

TEST_CASE("group weights: 1..1000 or from-cgroup") {
    auto r = load(std::string(R"(groups:
  - {name: a, weight: 0}
  - {name: b, weight: 1001}
  - {name: c, weight: heavy}
  - {name: d, weight: from-cgroup}
  - {weight: 5}
)") + minimal_tail);
    expect_error(r, "groups[0].weight", 2, 23, "out of range: 0 (allowed 1..1000)");
    expect_error(r, "groups[1].weight", 3, 23, "out of range: 1001");
    expect_error(r, "groups[2].weight", 4, 23, "expected a weight 1..1000 or from-cgroup, got 'heavy'");
    expect_error(r, "groups[4].name", 6, 5, "missing: every group needs a name");
    CHECK(r.errors.size() == 4);
}

TEST_CASE("rules: match keys are checked") {
    auto r = load(std::string(R"(rules:
  - match: {cgroup: web.slice, uid: -1, gid: 4294967295}
    group: default
  - match: {address: 10.0.0.0/33, export: e1, pid: 4}
    group: default
  - group: default
  - match: {address: "fd00::/8"}
)") + minimal_tail);
    expect_error(r, "rules[0].match.cgroup", 2, 21, "a cgroup path starts with '/'");
    expect_error(r, "rules[0].match.uid", 2, 37, "expected a whole number 0..4294967294");
    expect_error(r, "rules[0].match.gid", 2, 46, "out of range");
    expect_error(r, "rules[1].match.address", 4, 22, "expected an IP address or CIDR block");
    expect_error(r, "rules[1].match.export", 4, 43, "unknown export 'e1' (did you mean 'e0'?)");
    expect_error(r, "rules[1].match.pid", 4, 47, "unknown key");
    expect_error(r, "rules[2].match", 6, 5, "missing: a rule needs match");
    expect_error(r, "rules[3].group", 7, 5, "missing: a rule needs the group");
}
