// YAML-level errors: syntax, unknown and repeated keys, wrong types.
#include "helpers.hpp"

using namespace nbdsched::config;
using namespace nbdsched::config::test;

TEST_CASE("a YAML syntax error names line and column") {
    auto r = load("devices: {\nlog_level: a: b\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].message.find("YAML syntax error") == 0);
    CHECK(r.errors[0].origin.line >= 1);
    CHECK(r.errors[0].origin.column >= 1);
    expect_error(load("log_level: a: b\n"), "", 1, 13, "YAML syntax error: illegal map value");
}

TEST_CASE("an empty document is an error") {
    auto r = load("# nothing here\n");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].message.find("empty configuration") == 0);
}

TEST_CASE("unknown keys, with a suggestion for near misses") {
    auto r = load(R"(exprots: []
devices:
  - name: d0
    sise: 1GiB
    frobnicate: 1
exports:
  - {name: e0, device: d0, readonyl: true}
)");
    expect_error(r, "exprots", 1, 1, "unknown key (did you mean 'exports'?)");
    expect_error(r, "devices[0].sise", 4, 5, "did you mean 'size'?");
    expect_error(r, "devices[0].frobnicate", 5, 5, "unknown key (known keys: name, backend, size");
    expect_error(r, "exports[0].readonyl", 7, 28,
                 "did you mean 'readonly'?");
}

TEST_CASE("repeated keys are refused") {
    auto r = load(R"(devices:
  - name: d0
    size: 1GiB
    size: 2GiB
exports: [{name: e0, device: d0}]
)");
    expect_error(r, "devices[0].size", 4, 5, "repeated key (first at test.yaml:3:5)");
}

TEST_CASE("wrong types name what was expected and what was found") {
    auto r = load(R"(devices:
  - name: d0
    size: [1, 2]
    direct: maybe
    writes_sync:
    tunables: 4
  - just-a-name
exports: {name: e0}
)");
    expect_error(r, "devices[0].size", 3, 11, "expected a size (e.g. 512MiB), got a list");
    expect_error(r, "devices[0].direct", 4, 13, "expected true or false, got 'maybe'");
    expect_error(r, "devices[0].writes_sync", 5, 5, "expected true or false, got nothing");
    expect_error(r, "devices[0].tunables", 6, 15, "expected a mapping");
    expect_error(r, "devices[1]", 7, 5, "expected a mapping (key: value), got 'just-a-name'");
    expect_error(r, "exports", 8, 10, "expected a list (- item), got a mapping");
}

TEST_CASE("the top level must be a mapping") {
    expect_error(load("- a\n- b\n"), "", 1, 1, "expected a mapping");
}

TEST_CASE("devices and exports are required") {
    auto r = load("log_level: info\n");
    expect_error(r, "devices", 1, 1, "missing");
    expect_error(r, "exports", 1, 1, "missing");
    // Present but empty serves nothing just as well.
    r = load("devices: []\nexports: []\n");
    expect_error(r, "devices", 1, 10, "empty: at least one device is needed");
    expect_error(r, "exports", 2, 10, "empty: at least one export is needed");
    expect_error(load("devices: [{name: d0, size: 1MiB}]\nexports: []\n"), "exports", 2, 10, "empty");
}

TEST_CASE("every error is reported, in file order") {
    auto r = load(R"(log_level: loud
devices:
  - {name: d0, size: huge}
exports:
  - {name: e0, device: d9}
limits: {max_connections: 0}
)");
    INFO(all_errors(r));
    REQUIRE(r.errors.size() == 4);
    CHECK(r.errors[0].key == "log_level");
    CHECK(r.errors[1].key == "devices[0].size");
    CHECK(r.errors[2].key == "exports[0].device");
    CHECK(r.errors[3].key == "limits.max_connections");
    CHECK(r.errors[1].str() == "test.yaml:3:22: devices[0].size: bad size 'huge' (use e.g. 4096, 64KiB, 512MiB, 1GiB, 2TiB)");
}

TEST_CASE("several YAML documents are refused") {
    auto r = load(std::string(minimal_tail) + "---\nlog_level: debug\n");
    REQUIRE_FALSE(r.config);
    CHECK(r.errors.at(0).message.find("a second YAML document") == 0);
    CHECK(r.errors.at(0).origin.line == 5);   // the '---' that starts it
}

TEST_CASE("a stray comma where a value starts is a syntax error, not a hang") {
    // yaml-cpp 0.7's LoadAll loops for ever on this (found by fuzz-config).
    auto r = load(", offset: 100GiB}\ngroups: [{name: ga}]\n");
    REQUIRE_FALSE(r.config);
    INFO(all_errors(r));
    CHECK(r.errors.at(0).message == "YAML syntax error: unexpected ',' where a value should start");
    auto leading = load(",\n");
    REQUIRE(leading.errors.size() == 1);
    CHECK(leading.errors[0].origin.line == 1);
    CHECK(leading.errors[0].origin.column == 1);
}

TEST_CASE("garbage is reported, never thrown") {
    const std::string inputs[] = {
        std::string(2000, '['),
        std::string("\0\1\2\xff\xfe", 5),
        "devices: &a [*a]\n",
        "? [a, b]\n: c\n",
        "devices:\n\t- name: d0\n",
        "devices: [{name: d0, size: 99999999999999999999999}]\nexports: [{name: e, device: d0}]\n",
        "exports: [{name: e, device: d0, offset: 18446744073709551615}]\ndevices: [{name: d0, size: 1}]\n",
        "listen: [{tcp: \"[:10809\"}, {tcp: \"]:1\"}, {tcp: \"[]:1\"}, {unix: {a: b}}]\n",
        "groups: [{name: \"\"}, {name: ~}, {name: [x]}]\n",
    };
    for (const auto& text : inputs) {
        INFO("input: " << text);
        LoadResult r;
        CHECK_NOTHROW(r = load(text));
        CHECK_FALSE(r.config.has_value());
        CHECK_FALSE(r.errors.empty());
    }
}

TEST_CASE("a string that is not UTF-8 is refused at its position") {
    // Names and paths reach ctl's JSON, metric labels and logs; NBD says export names are UTF-8.
    auto r = load("devices:\n"
                  "  - {name: d0, size: 1GiB}\n"
                  "  - {name: d1, backend: file, path: /tmp/d\xe9.img}\n"
                  "exports:\n"
                  "  - {name: \"e\xfex\", device: d0}\n"
                  "  - {name: e1, device: d0, description: \"caf\xc3\xa9 \xed\xa0\x80\"}\n");
    expect_error(r, "exports[0].name", 5, 12, "not valid UTF-8: byte 1 (0xfe) of 'e\\xfex'");
    expect_error(r, "exports[1].description", 6, 41, "not valid UTF-8: byte 6 (0xed)");
    expect_error(r, "devices[1].path", 3, 37, "not valid UTF-8: byte 6 (0xe9) of '/tmp/d\\xe9.img'");
    CHECK(load("devices: [{name: d0, size: 1GiB}]\n"
               "exports: [{name: \"caf\xc3\xa9 \xf0\x9f\x92\xbe\", device: d0}]\n")
              .config.has_value());
}
