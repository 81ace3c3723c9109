// listen entries, control, metrics, log_level and limits.
#include "helpers.hpp"

using namespace nbdsched::config;
using namespace nbdsched::config::test;

namespace {

LoadResult with(const std::string& head) { return load(head + minimal_tail); }

}   // namespace

TEST_CASE("listen entries: unix: PATH or tcp: HOST:PORT") {
    auto r = with(R"(listen:
  - tcp: 127.0.0.1
  - tcp: "::1:10809"
  - tcp: 127.0.0.1:70000
  - tcp: ":10809"
  - unix: ""
  - {unix: /a, tcp: "b:1"}
  - udp: 1.2.3.4:5
  - tcp: "[::1:10809"
  - tcp: "[10.0.0.1]:10809"
  - tcp: [::1]
)");
    expect_error(r, "listen[0].tcp", 2, 10, "expected HOST:PORT");
    expect_error(r, "listen[1].tcp", 3, 10, "an IPv6 address needs brackets: [::1]:10809");
    expect_error(r, "listen[2].tcp", 4, 10, "bad port '70000' (1..65535)");
    expect_error(r, "listen[3].tcp", 5, 10, "host missing");
    expect_error(r, "listen[4].unix", 6, 11, "empty socket path");
    expect_error(r, "listen[5]", 7, 5, "exactly one of unix: PATH or tcp: HOST:PORT");
    expect_error(r, "listen[6].udp", 8, 5, "unknown key");
    expect_error(r, "listen[7].tcp", 9, 10, "expected [IPv6]:PORT");
    expect_error(r, "listen[8].tcp", 10, 10, "not an IPv6 address");
    expect_error(r, "listen[9].tcp", 11, 10, "quote an IPv6 address");
}

TEST_CASE("listen: socket paths that do not fit, repeats, an empty list") {
    std::string long_path(120, 'x');
    expect_error(with("listen:\n  - unix: /" + long_path + "\n"), "listen[0].unix", 2, 11, "longer than 107 bytes");
    expect_error(with("listen:\n  - tcp: 127.0.0.1:1\n  - tcp: 127.0.0.1:1\n"), "listen[1]", 3, 10,
                 "listed twice (first at test.yaml:2:10)");
    expect_error(with("listen: []\n"), "listen", 1, 9, "empty");
}

TEST_CASE("listen: one endpoint written two ways, or covered by a wildcard, is listed twice") {
    expect_error(with("listen:\n  - unix: /tmp/x/a.sock\n  - unix: /tmp/x//a.sock\n"), "listen[1]", 3, 11,
                 "listed twice (first at test.yaml:2:11, as unix /tmp/x/a.sock)");
    expect_error(with("listen:\n  - tcp: localhost:19490\n  - tcp: 127.0.0.1:19490\n"), "listen[1]", 3, 10,
                 "listed twice (first at test.yaml:2:10, as tcp localhost:19490)");
    // Each pair binds one socket twice (a wildcard takes the port on every address of its family; [::] on both).
    const char* clashing[][2] = {
        {"unix: /tmp/x/./a.sock", "unix: /tmp/x/y/../a.sock"},
        {"tcp: \"[::1]:19490\"", "tcp: \"[0:0::1]:19490\""},
        {"{tcp: 0.0.0.0:19490, insecure: true}", "tcp: 127.0.0.1:19490"},
        {"tcp: 127.0.0.1:19490", "{tcp: \"[::]:19490\", insecure: true}"},
    };
    for (const auto& pair : clashing) {
        CAPTURE(pair[1]);
        auto text = std::string("listen:\n  - ") + pair[0] + "\n  - " + pair[1] + "\n";
        auto r = with(text);
        REQUIRE_FALSE(r.config.has_value());
        CHECK(all_errors(r).find("listen[1]: listed twice") != std::string::npos);
    }
    // Different ports, different files, or IPv4 and IPv6 loopback: both bind.
    const char* apart[][2] = {
        {"tcp: 127.0.0.1:19490", "tcp: 127.0.0.1:19491"},
        {"tcp: 127.0.0.1:19490", "tcp: \"[::1]:19490\""},
        {"unix: /tmp/x/a.sock", "unix: /tmp/x/b.sock"},
    };
    for (const auto& pair : apart) {
        CAPTURE(pair[1]);
        auto r = with(std::string("listen:\n  - ") + pair[0] + "\n  - " + pair[1] + "\n");
        CHECK_MESSAGE(r.config.has_value(), all_errors(r));
    }
}

TEST_CASE("control: the path of a unix listener is refused, however it is written") {
    expect_error(with("listen:\n  - unix: /tmp/x/nbd.sock\ncontrol: /tmp/x//nbd.sock\n"), "control", 3, 10,
                 "the same socket as the listener at test.yaml:2:11");
    CHECK(with("listen:\n  - unix: /tmp/x/nbd.sock\ncontrol: /tmp/x/ctl.sock\n").config.has_value());
}

TEST_CASE("metrics: an IPv6 address is refused, since the endpoint cannot bind it") {
    expect_error(with("metrics: \"[::1]:9810\"\n"), "metrics", 1, 10, "listens on IPv4 only");
    expect_error(with("metrics: \"[::]:9810\"\n"), "metrics", 1, 10, "listens on IPv4 only");
    CHECK(with("metrics: 127.0.0.1:9810\n").config->metrics == "127.0.0.1:9810");
    CHECK(with("metrics: localhost:9810\n").config->metrics == "localhost:9810");
}

TEST_CASE("metrics: and listen: tcp: take only real IPv4 addresses") {
    // Civetweb would bind 127.0.0.257 as 127.0.1.1 and 999.1.1.1 as 231.1.1.1.
    for (const char* host : {"127.0.0.257", "999.1.1.1", "127.1", "1.2.3.4.5", "127.00.0.1"}) {
        CAPTURE(host);
        expect_error(with(std::string("metrics: \"") + host + ":9810\"\n"), "metrics", 1, 10,
                     std::string("'") + host + "' is not an IPv4 address");
    }
    // Not "listening on 127.0.0.257 (not loopback) without TLS", and not passed with insecure: true.
    expect_error(with("listen:\n  - tcp: 127.0.0.257:10813\n"), "listen[0].tcp", 2, 10,
                 "'127.0.0.257' is not an IPv4 address (four numbers 0..255");
    expect_error(with("listen:\n  - {tcp: 127.0.0.257:10813, insecure: true}\n"), "listen[0].tcp", 2, 11,
                 "is not an IPv4 address");
    CHECK(with("metrics: 0.0.0.0:9810\n").config->metrics == "0.0.0.0:9810");
    CHECK(with("metrics: 255.255.255.255:9810\n").config.has_value());
    CHECK(with("metrics: metrics-host.example:9810\n").config.has_value());
}

TEST_CASE("control, metrics and log_level") {
    auto r = with("control: \"\"\nmetrics: 9810\nlog_level: warning\n");
    expect_error(r, "control", 1, 10, "empty socket path");
    expect_error(r, "metrics", 2, 10, "expected HOST:PORT");
    expect_error(r, "log_level", 3, 12, "expected one of trace, debug, info, warn, error, got 'warning' (did you mean 'warn'?)");
}

TEST_CASE("limits") {
    auto r = with(R"(limits:
  max_connections: 0
  max_request_bytes: 64MiB
  max_inflight_per_connection: many
  max_inflight_bytes_per_connection: 1MiB
  max_inflight_per_devices: 4
  io_threads: 0
)");
    expect_error(r, "limits.max_connections", 2, 20, "out of range: 0");
    expect_error(r, "limits.max_request_bytes", 3, 22, "allowed 512 bytes to 32MiB");
    expect_error(r, "limits.max_inflight_per_connection", 4, 32, "expected a whole number");
    expect_error(r, "limits.max_inflight_bytes_per_connection", 5, 38, "is below max_request_bytes");
    expect_error(r, "limits.max_inflight_per_devices", 6, 3, "did you mean 'max_inflight_per_device'?");
    expect_error(r, "limits.io_threads", 7, 15, "out of range: 0");
}

TEST_CASE("parse_tcp_listen: the tcp: syntax for the command line") {
    std::string error;
    auto v6 = parse_tcp_listen("[::1]:10810", error);
    REQUIRE(v6);
    CHECK(v6->kind == Listen::Kind::tcp);
    CHECK(v6->host == "::1");
    CHECK(v6->port == 10810);
    CHECK_FALSE(parse_tcp_listen("::1:10810", error));
    CHECK(error.find("brackets") != std::string::npos);
    CHECK_FALSE(parse_tcp_listen("127.0.0.1:0", error));
    CHECK_FALSE(parse_tcp_listen("127.0.0.1", error));
}

TEST_CASE("listen: a non-loopback TCP listener needs tls: require or insecure: true") {
    auto r = with(R"(tls: {psk_file: /k.psk}
listen:
  - tcp: 0.0.0.0:10809
  - tcp: 10.1.2.3:1
    tls: on
  - tcp: "[::]:2"
    tls: require
  - tcp: 0.0.0.0:3
    insecure: true
  - tcp: 127.0.0.2:4
  - tcp: localhost:5
  - unix: /s
    tls: maybe
)");
    expect_error(r, "listen[0].tcp", 3, 10, "(not loopback) without TLS");
    expect_error(r, "listen[1].tcp", 4, 10, "add tls: require");
    expect_error(r, "listen[6].tls", 13, 10, "expected one of off, on, require");
    CHECK(r.errors.size() == 3);
}

TEST_CASE("is_loopback: every spelling of a loopback address, as a socket systemd passes may show it") {
    auto at = [](const char* host) {
        Listen l;
        l.kind = Listen::Kind::tcp;
        l.host = host;
        return is_loopback(l);
    };
    CHECK(at("127.0.0.1"));
    CHECK(at("127.9.9.9"));
    CHECK(at("::1"));
    CHECK(at("::ffff:127.0.0.1"));   // an IPv6 socket bound to the IPv4 loopback
    CHECK(at("localhost"));
    CHECK_FALSE(at("0.0.0.0"));
    CHECK_FALSE(at("::"));
    CHECK_FALSE(at("::ffff:10.0.0.1"));
    CHECK_FALSE(at("128.0.0.1"));
}

TEST_CASE("tls: keys, verify_clients and listeners that need them") {
    auto ok = with("tls: {psk_file: /k.psk, certificates: /pki, verify_clients: true}\n"
                   "listen: [{unix: /s, tls: require}, {tcp: \"0.0.0.0:1\", tls: on, insecure: true}]\n");
    REQUIRE(ok.errors.empty());
    CHECK(ok.config->tls.psk_file == "/k.psk");
    CHECK(ok.config->tls.certificates == "/pki");
    CHECK(ok.config->tls.verify_clients);
    CHECK(ok.config->listen[0].tls == Listen::Tls::require);
    CHECK(ok.config->listen[1].tls == Listen::Tls::on);
    CHECK(ok.config->listen[1].insecure);

    expect_error(with("tls: {}\n"), "tls", 1, 6, "give psk_file:, certificates: or both");
    expect_error(with("tls: {psk_file: /k, verify_clients: true}\n"), "tls", 1, 6, "verify_clients: true needs certificates:");
    expect_error(with("tls: {certificate: /pki}\n"), "tls.certificate", 1, 7, "did you mean 'certificates'?");
    expect_error(with("listen: [{unix: /s, tls: require}]\n"), "listen", 1, 17, "needs a top-level tls: section");
}

TEST_CASE("limits: max_handshakes") {
    CHECK(with("").config->limits.max_handshakes == 128);
    auto ok = with("limits: {max_handshakes: 16}\n");
    REQUIRE(ok.errors.empty());
    CHECK(ok.config->limits.max_handshakes == 16);
    expect_error(with("limits:\n  max_handshakes: 0\n"), "limits.max_handshakes", 2, 19, "out of range: 0");
}

TEST_CASE("limits: handshake_timeout and max_handshake_options") {
    auto ok = with("limits: {handshake_timeout: 500ms, max_handshake_options: 16}\n");
    REQUIRE(ok.errors.empty());
    CHECK(ok.config->limits.handshake_timeout == std::chrono::milliseconds(500));
    CHECK(ok.config->limits.max_handshake_options == 16);
    auto r = with("limits:\n  handshake_timeout: 0s\n  max_handshake_options: 0\n");
    expect_error(r, "limits.handshake_timeout", 2, 22, "expected a duration from 1ms to 1h");
    expect_error(r, "limits.max_handshake_options", 3, 26, "out of range: 0");
}

TEST_CASE("limits: drain_timeout bounds a shutdown's and a hand-over's waits") {
    CHECK(with("").config->limits.drain_timeout == std::chrono::seconds(10));   // default
    CHECK(with("limits: {drain_timeout: 2s}\n").config->limits.drain_timeout == std::chrono::seconds(2));
    CHECK(with("limits: {drain_timeout: 2500ms}\n").config->limits.drain_timeout == std::chrono::milliseconds(2500));
    CHECK(with("limits: {drain_timeout: 1min}\n").config->limits.drain_timeout == std::chrono::minutes(1));
    // The top of the range the error message offers ("1ms to 1h"), in its own unit.
    CHECK(with("limits: {drain_timeout: 1h}\n").config->limits.drain_timeout == std::chrono::hours(1));
    CHECK(with("limits: {handshake_timeout: 1h}\n").config->limits.handshake_timeout == std::chrono::hours(1));
    CHECK(with("limits: {drain_timeout: 750}\n").config->limits.drain_timeout == std::chrono::milliseconds(750));   // bare: ms
    auto r = with("limits:\n  drain_timeout: 0s\n  max_connections: 4\n");
    expect_error(r, "limits.drain_timeout", 2, 18, "must be at least 1ms (got 0s)");
    expect_error(with("limits:\n  drain_timeout: -5s\n"), "limits.drain_timeout", 2, 18, "must be at least 1ms (got -5s)");
    expect_error(with("limits:\n  drain_timeout: 0\n"), "limits.drain_timeout", 2, 18, "must be at least 1ms");
    expect_error(with("limits:\n  drain_timeout: soon\n"), "limits.drain_timeout", 2, 18,
                 "expected a duration from 1ms to 1h, e.g. 10s or 2500ms");
    expect_error(with("limits:\n  drain_timeout: 10parsecs\n"), "limits.drain_timeout", 2, 18, "expected a duration");
    expect_error(with("limits:\n  drain_timeout: 90min\n"), "limits.drain_timeout", 2, 18, "too long: at most 1h");
    expect_error(with("limits:\n  drain_timeout: [1s]\n"), "limits.drain_timeout", 2, 18, "");
    expect_error(with("limits:\n  drain_timout: 1s\n"), "limits.drain_timout", 2, 3, "did you mean 'drain_timeout'?");
}

TEST_CASE("limits: stall_timeout is off by default, 0 or 1s..24h") {
    CHECK(with("").config->limits.stall_timeout == std::chrono::milliseconds(0));
    CHECK(with("limits: {stall_timeout: 0}\n").config->limits.stall_timeout == std::chrono::milliseconds(0));
    CHECK(with("limits: {stall_timeout: 90s}\n").config->limits.stall_timeout == std::chrono::seconds(90));
    CHECK(with("limits: {stall_timeout: 24h}\n").config->limits.stall_timeout == std::chrono::hours(24));
    const char* range = "expected 0 (off) or a duration from 1s to 24h, e.g. 60s";
    expect_error(with("limits:\n  stall_timeout: 500ms\n"), "limits.stall_timeout", 2, 18, range);
    expect_error(with("limits:\n  stall_timeout: 25h\n"), "limits.stall_timeout", 2, 18, range);
    expect_error(with("limits:\n  stall_timeout: -1s\n"), "limits.stall_timeout", 2, 18, range);
    expect_error(with("limits:\n  stall_timeout: never\n"), "limits.stall_timeout", 2, 18, range);
}

TEST_CASE("limits: busy_poll") {
    using std::chrono::microseconds;
    auto ok = with("limits: {busy_poll: 50us}\n");
    REQUIRE(ok.errors.empty());
    CHECK(ok.config->limits.busy_poll == LoopWindow{microseconds(50), false});
    CHECK(with("limits: {busy_poll: 0}\n").config->limits.busy_poll.window == microseconds(0));
    CHECK(with("limits: {busy_poll: 100}\n").config->limits.busy_poll.window == microseconds(100));   // bare: us
    CHECK(with("limits: {busy_poll: auto}\n").config->limits.busy_poll == Limits::busy_poll_auto);
    CHECK(with("").config->limits.busy_poll == Limits::busy_poll_auto);                 // auto by default
    CHECK(with("limits: {busy_poll: 0}\n").config->limits.busy_poll == LoopWindow{});   // 0: off
    expect_error(with("limits:\n  busy_poll: 2ms\n"), "limits.busy_poll", 2, 14, "expected auto or a duration from 0 to 1ms");
    expect_error(with("limits:\n  busy_poll: fast\n"), "limits.busy_poll", 2, 14, "expected auto or a duration from 0 to 1ms");
}

TEST_CASE("limits: coalesce") {
    using std::chrono::microseconds;
    CHECK(with("").config->limits.coalesce == Limits::coalesce_auto);   // auto by default
    CHECK(with("limits: {coalesce: auto}\n").config->limits.coalesce == Limits::coalesce_auto);
    CHECK(with("limits: {coalesce: 0}\n").config->limits.coalesce == LoopWindow{});   // 0: never nap
    CHECK(with("limits: {coalesce: 200us}\n").config->limits.coalesce == LoopWindow{microseconds(200), false});
    CHECK(with("limits: {coalesce: 30}\n").config->limits.coalesce.window == microseconds(30));   // bare: us
    expect_error(with("limits:\n  coalesce: 5ms\n"), "limits.coalesce", 2, 13, "expected auto or a duration from 0 to 1ms");
    expect_error(with("limits:\n  coalesce: -1us\n"), "limits.coalesce", 2, 13, "expected auto or a duration from 0 to 1ms");
}

TEST_CASE("limits: threads") {
    auto ok = with("limits: {threads: 4}\n");
    REQUIRE(ok.errors.empty());
    CHECK(ok.config->limits.threads == 4);
    CHECK(with("").config->limits.threads == 0);   // one per CPU, resolved at start
    expect_error(with("limits:\n  threads: 0\n"), "limits.threads", 2, 12, "out of range: 0");
    expect_error(with("limits:\n  threads: many\n"), "limits.threads", 2, 12, "");
}

TEST_CASE("no listen: and a default socket path too long for sockaddr_un (a long $XDG_RUNTIME_DIR)") {
    const char* saved = std::getenv("XDG_RUNTIME_DIR");
    std::string saved_value = saved ? saved : "";
    setenv("XDG_RUNTIME_DIR", ("/tmp/" + std::string(100, 'x')).c_str(), 1);
    auto r = load(minimal_tail);
    expect_error(r, "listen", 1, 1, "not given, and the default unix socket /tmp/xxx");
    expect_error(r, "listen", 1, 1, "(from $XDG_RUNTIME_DIR) is longer than 107 bytes");
    CHECK(default_listen_problem().has_value());
    setenv("XDG_RUNTIME_DIR", "/run/user/4242", 1);
    CHECK(load(minimal_tail).config.has_value());
    CHECK_FALSE(default_listen_problem().has_value());
    if (saved) setenv("XDG_RUNTIME_DIR", saved_value.c_str(), 1);
    else unsetenv("XDG_RUNTIME_DIR");
}
