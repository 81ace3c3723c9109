// Good configurations load into the structs with every value where it belongs.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>

#include "helpers.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::config;
using namespace nbdsched::config::test;

TEST_CASE("a full config round-trips into the structs") {
    auto r = load(R"(listen:
  - unix: /tmp/nbd.sock
  - tcp: "[::1]:10810"
  - tcp: localhost:10811
devices:
  - name: d0
    backend: ram
    size: 2GiB
    rotational: true
    scheduler: none
    tunables: {max_depth: 8}
    read_ahead_kb: 256
    read_ahead_cache: 16MiB
    writes_sync: no
    queue_depth: 16
    default_group: batch
  - name: f1
    backend: file
    path: /var/tmp/f1.img
    direct: true
    rotational: auto
    profile: hdd
    hdd: {rpm: 5400, avg_seek: 6ms}
exports:
  - {name: whole, device: d0, readonly: true, description: "all of it"}
  - {name: win, device: d0, offset: 1GiB, size: 512MiB, group: web}
  - {name: file, device: f1}
groups:
  - {name: web, weight: 1000}
  - {name: batch, weight: from-cgroup}
rules:
  - match: {cgroup: /web.slice, uid: 33, gid: 33}
    group: web
  - match: {address: 10.0.0.0/8, export: win}
    group: batch
  - match: {}
    group: default
control: /tmp/ctl.sock
metrics: 127.0.0.1:9810
log_level: debug
limits:
  max_connections: 10
  max_inflight_per_connection: 4
  max_inflight_bytes_per_connection: 32MiB
  max_request_bytes: 1MiB
  max_inflight_per_device: 100
  max_inflight_bytes_per_device: 128MiB
  inflight_fair_share: false
  io_threads: 4
)");
    INFO(all_errors(r));
    REQUIRE(r.config);
    const Config& c = *r.config;
    CHECK(c.source == "test.yaml");

    REQUIRE(c.listen.size() == 3);
    CHECK(c.listen[0].kind == Listen::Kind::unix_socket);
    CHECK(c.listen[0].path == "/tmp/nbd.sock");
    CHECK(c.listen[0].origin.line == 2);
    CHECK(c.listen[1].kind == Listen::Kind::tcp);
    CHECK(c.listen[1].host == "::1");
    CHECK(c.listen[1].port == 10810);
    CHECK(c.listen[2].host == "localhost");
    CHECK(c.listen[2].port == 10811);

    REQUIRE(c.devices.size() == 2);
    const Device& d0 = c.devices[0];
    CHECK(d0.name == "d0");
    CHECK(d0.backend == BackendKind::ram);
    CHECK(d0.size == (2ull << 30));
    CHECK(d0.rotational == Tristate::yes);
    CHECK(d0.scheduler == "none");
    CHECK(d0.tunables.at("max_depth") == "8");
    CHECK(d0.read_ahead_kb == 256u);
    CHECK(d0.read_ahead_cache == (16u << 20));
    CHECK_FALSE(d0.writes_sync);   // the default is true: no proves the key is read
    CHECK(d0.queue_depth == 16);
    CHECK(d0.default_group == "batch");
    CHECK(d0.profile == "none");
    CHECK(d0.origin.line == 6);
    CHECK(d0.origin.column == 5);
    const Device& f1 = c.devices[1];
    CHECK(f1.backend == BackendKind::file);
    CHECK(f1.path == "/var/tmp/f1.img");
    CHECK(f1.size == 0);
    CHECK(f1.direct);
    CHECK(f1.rotational == Tristate::automatic);
    CHECK(f1.profile == "hdd");
    CHECK(f1.profile_params.at("rpm") == "5400");
    CHECK(f1.profile_params.at("avg_seek") == "6ms");
    CHECK_FALSE(f1.read_ahead_kb.has_value());   // auto
    CHECK(f1.default_group == "default");

    REQUIRE(c.exports.size() == 3);
    CHECK(c.exports[0].readonly);
    CHECK(c.exports[0].description == "all of it");
    CHECK_FALSE(c.exports[0].size.has_value());
    CHECK(c.exports[0].group.empty());
    CHECK(c.exports[1].offset == (1ull << 30));
    CHECK(c.exports[1].size == (512ull << 20));
    CHECK(c.exports[1].group == "web");
    CHECK(c.find_export("file")->device == "f1");
    CHECK(c.find_export("nope") == nullptr);
    CHECK(c.find_device("f1") == &c.devices[1]);

    REQUIRE(c.groups.size() == 3);   // the implicit default comes first
    CHECK(c.groups[0].name == "default");
    CHECK(c.groups[0].weight == 100);
    CHECK(c.find_group("web")->weight == 1000);
    CHECK(c.find_group("batch")->weight_from_cgroup);

    REQUIRE(c.rules.size() == 3);
    CHECK(c.rules[0].cgroup == "/web.slice");
    CHECK(c.rules[0].uid == 33u);
    CHECK(c.rules[0].gid == 33u);
    CHECK_FALSE(c.rules[0].address.has_value());
    CHECK(c.rules[0].group == "web");
    CHECK(c.rules[1].address == "10.0.0.0/8");
    CHECK(c.rules[1].export_name == "win");
    CHECK_FALSE(c.rules[2].cgroup.has_value());
    CHECK(c.rules[2].group == "default");

    CHECK(c.control == "/tmp/ctl.sock");
    CHECK(c.metrics == "127.0.0.1:9810");
    CHECK(c.log_level == "debug");
    CHECK(c.limits.max_connections == 10);
    CHECK(c.limits.max_inflight_per_connection == 4);
    CHECK(c.limits.max_inflight_bytes_per_connection == (32u << 20));
    CHECK(c.limits.max_request_bytes == (1u << 20));
    CHECK(c.limits.max_inflight_per_device == 100);
    CHECK(c.limits.max_inflight_bytes_per_device == (128u << 20));
    CHECK_FALSE(c.limits.inflight_fair_share);
    CHECK(c.limits.io_threads == 4);
}

TEST_CASE("a minimal config gets the defaults") {
    auto r = load(minimal_tail);
    INFO(all_errors(r));
    REQUIRE(r.config);
    const Config& c = *r.config;
    CHECK(c.listen.size() == 2);   // default_listen() without a listen: key
    CHECK(c.log_level == "info");
    CHECK(c.control.empty());
    CHECK(c.metrics.empty());
    CHECK(c.groups.size() == 1);
    CHECK(c.devices[0].scheduler == "none");
    CHECK(c.devices[0].rotational == Tristate::automatic);
    CHECK(c.limits.max_request_bytes == (32u << 20));
}

TEST_CASE("declaring the default group changes its weight, not the count") {
    auto r = load(std::string("groups: [{name: default, weight: 500}]\n") + minimal_tail);
    REQUIRE(r.config);
    REQUIRE(r.config->groups.size() == 1);
    CHECK(r.config->groups[0].weight == 500);
}

TEST_CASE("the example config loads") {
    auto r = load_file(NBDSCHED_EXAMPLE_CONFIG);
    INFO(all_errors(r));
    REQUIRE(r.config);
    CHECK(r.config->devices.size() == 2);
    CHECK(r.config->exports.size() == 3);
    CHECK(r.config->find_device("disk")->profile == "hdd");
    CHECK(r.config->find_device("disk")->scheduler == "cfq");
    CHECK(r.config->find_device("disk")->tunables.at("slice_idle") == "8ms");
    CHECK(r.config->find_group("tenant-a")->weight == 1000);
}

TEST_CASE("load_file reports a file it cannot read") {
    auto r = load_file("/nonexistent/nbdsched.yaml");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str() == "/nonexistent/nbdsched.yaml: cannot read: No such file or directory");
}

TEST_CASE("load_file says a directory is a directory, not an empty configuration") {
    auto r = load_file("/tmp");
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].str() == "/tmp: is a directory, not a configuration file");
}

TEST_CASE("load_file refuses what is not a regular file, or is too large, at once") {
    nbdsched::testlib::TempDir dir;
    const std::string fifo = dir.file("fifo.yaml"), big = dir.file("big.yaml");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    {
        std::ofstream out(big);
        out << minimal_tail;
    }
    REQUIRE(::truncate(big.c_str(), 1ll << 30) == 0);   // sparse: nothing to write
    const struct {
        std::string path, error;
    } cases[] = {
        {"/dev/zero", "/dev/zero: not a regular file (a character device)"},
        {fifo, fifo + ": not a regular file (a FIFO)"},   // no writer: reading would wait for ever
        {big, big + ": larger than 16MiB: not a configuration file"},
    };
    for (const auto& c : cases) {
        CAPTURE(c.path);
        const auto start = std::chrono::steady_clock::now();
        auto r = load_file(c.path);
        CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
        REQUIRE(r.errors.size() == 1);
        CHECK(r.errors[0].str() == c.error);
    }
    REQUIRE(::truncate(big.c_str(), 16 << 20) == 0);   // at the bound: read (and refused as YAML with NUL bytes)
    auto r = load_file(big);
    REQUIRE_FALSE(r.errors.empty());
    CHECK(r.errors[0].message.find("larger than") == std::string::npos);
}

TEST_CASE("embedded default: 1GiB RAM device d0 served as export default") {
    Config c = embedded_default();
    REQUIRE(c.devices.size() == 1);
    CHECK(c.devices[0].name == "d0");
    CHECK(c.devices[0].backend == BackendKind::ram);
    CHECK(c.devices[0].size == (1ull << 30));
    CHECK(c.devices[0].scheduler == "none");
    REQUIRE(c.exports.size() == 1);
    CHECK(c.exports[0].name == "default");
    CHECK(c.exports[0].device == "d0");
    CHECK(c.find_group("default") != nullptr);
    REQUIRE(c.listen.size() == 2);
    CHECK(c.listen[1].kind == Listen::Kind::tcp);
    CHECK(c.listen[1].host == "127.0.0.1");
    CHECK(c.listen[1].port == 10809);
}

TEST_CASE("default unix socket: XDG_RUNTIME_DIR, else /run as root, else /tmp per user") {
    const char* saved = std::getenv("XDG_RUNTIME_DIR");
    std::string saved_value = saved ? saved : "";
    setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
    CHECK(default_listen()[0].path == "/run/user/4242/nbdsched/nbdsched.sock");
    unsetenv("XDG_RUNTIME_DIR");
    std::string expected = geteuid() == 0 ? "/run/nbdsched/nbdsched.sock"
                                          : "/tmp/nbdsched-" + std::to_string(getuid()) + "/nbdsched.sock";
    CHECK(embedded_default().listen[0].path == expected);
    if (saved) setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
}

TEST_CASE("Origin and Error print as file:line:col: key: message") {
    CHECK(Origin{"a.yaml", 3, 7}.str() == "a.yaml:3:7");
    CHECK(Origin{"<embedded default>", 0, 0}.str() == "<embedded default>");
    CHECK(Error{Origin{"a.yaml", 3, 7}, "devices[0].size", "bad size"}.str() == "a.yaml:3:7: devices[0].size: bad size");
    CHECK(Error{Origin{"a.yaml", 1, 1}, "", "YAML syntax error: x"}.str() == "a.yaml:1:1: YAML syntax error: x");
}
