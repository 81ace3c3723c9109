// daemon/process/cli: --listen-unix/--listen-tcp go through the config's
// parsers (same checks and messages as the `listen:` keys), and --help says
// what the signals do and which subcommands exist.
#include <doctest/doctest.h>

#include <iostream>
#include <sstream>

#include "daemon/process/cli.hpp"

using namespace nbdsched;
using daemon::CliOptions;

namespace {

// The error apply_listen_overrides gives, or "" when it accepts the options.
std::string refusal(const CliOptions& options) {
    config::Config config;
    std::string error;
    bool ok = daemon::apply_listen_overrides(options, config, error);
    CHECK(ok == error.empty());
    return error;
}

CliOptions tcp(std::string text) {
    CliOptions o;
    o.listen_tcp.push_back(std::move(text));
    return o;
}

bool contains(const std::string& text, const std::string& part) {
    return text.find(part) != std::string::npos;
}

// What `nbdsched --help` prints (it exits 0).
std::string help_text() {
    std::ostringstream out;
    auto* saved = std::cout.rdbuf(out.rdbuf());
    std::string prog = "nbdsched", help = "--help";
    char* argv[] = {prog.data(), help.data(), nullptr};
    CliOptions options;
    auto code = daemon::parse_cli(2, argv, options);
    std::cout.rdbuf(saved);
    CHECK(code == 0);
    return out.str();
}

}   // namespace

TEST_CASE("--listen-tcp refuses port 0 and an IPv6 address without brackets") {
    auto port0 = refusal(tcp("127.0.0.1:0"));
    CHECK(contains(port0, "--listen-tcp '127.0.0.1:0'"));
    CHECK(contains(port0, "1..65535"));
    auto v6 = refusal(tcp("::1:10809"));
    CHECK(contains(v6, "--listen-tcp '::1:10809'"));
    CHECK(contains(v6, "needs brackets: [::1]:10809"));
    CHECK(contains(refusal(tcp("127.0.0.1:65536")), "1..65535"));
    CHECK(contains(refusal(tcp("10809")), "expected HOST:PORT"));
    CHECK(contains(refusal(tcp("[::1]10809")), "expected [IPv6]:PORT"));
}

TEST_CASE("--listen-tcp refuses a non-loopback address: plaintext there needs the config's insecure: true") {
    auto any = refusal(tcp("0.0.0.0:10809"));
    CHECK(contains(any, "--listen-tcp '0.0.0.0:10809'"));
    CHECK(contains(any, "not loopback"));
    CHECK(refusal(tcp("127.0.0.1:10809")).empty());
    CHECK(refusal(tcp("[::1]:10809")).empty());
}

TEST_CASE("--listen-unix refuses an empty or too long path") {
    CliOptions o;
    o.listen_unix = {""};
    CHECK(contains(refusal(o), "--listen-unix '': empty socket path"));
    o.listen_unix = {std::string(200, 'x')};
    CHECK(contains(refusal(o), "socket path longer than 107 bytes"));
}

TEST_CASE("--listen-unix/--listen-tcp refuse one endpoint twice, however written, and the control socket's path") {
    CliOptions o;
    o.listen_unix = {"/run/x/a.sock", "/run/x//a.sock"};
    CHECK(contains(refusal(o), "--listen-unix '/run/x//a.sock': listed twice"));
    o = tcp("localhost:10810");
    o.listen_tcp.push_back("127.0.0.1:10810");
    CHECK(contains(refusal(o), "--listen-tcp '127.0.0.1:10810': listed twice"));

    config::Config config;
    config.control = "/run/x/ctl.sock";
    std::string error;
    o = CliOptions{};
    o.listen_unix = {"/run/x/./ctl.sock"};
    CHECK_FALSE(daemon::apply_listen_overrides(o, config, error));
    CHECK(contains(error, "--listen-unix '/run/x/./ctl.sock': the path of the control socket"));
    o.listen_unix = {"/run/x/nbd.sock"};
    CHECK(daemon::apply_listen_overrides(o, config, error));
}

TEST_CASE("--listen-unix and --listen-tcp replace the config's listen list") {
    CliOptions o;
    o.listen_unix = {"/run/a.sock"};
    o.listen_tcp = {"[::1]:10810", "localhost:10811"};
    config::Config config;
    config.listen = config::default_listen();
    std::string error;
    REQUIRE(daemon::apply_listen_overrides(o, config, error));
    REQUIRE(config.listen.size() == 3);
    CHECK(config.listen[0].kind == config::Listen::Kind::unix_socket);
    CHECK(config.listen[0].path == "/run/a.sock");
    CHECK(config.listen[1].kind == config::Listen::Kind::tcp);
    CHECK(config.listen[1].host == "::1");
    CHECK(config.listen[1].port == 10810);
    CHECK(config.listen[2].host == "localhost");
    CHECK(config.listen[2].origin.file == "<command line>");

    // Without either option the config's list stays; a refused one leaves it too.
    auto before = config.listen.size();
    CHECK(daemon::apply_listen_overrides(CliOptions{}, config, error));
    CHECK(config.listen.size() == before);
    CHECK_FALSE(daemon::apply_listen_overrides(tcp("127.0.0.1:0"), config, error));
    CHECK(config.listen.size() == before);
}

TEST_CASE("--help says that SIGHUP reloads the configuration") {
    const auto out = help_text();
    CHECK(contains(out, "SIGHUP reloads the configuration"));
    CHECK_FALSE(contains(out, "reserved"));
}

TEST_CASE("--help names the subcommands ctl, attach and detach") {
    const auto out = help_text();
    CHECK(contains(out, "nbdsched ctl "));
    CHECK(contains(out, "nbdsched attach "));
    CHECK(contains(out, "nbdsched detach "));
}

TEST_CASE("--break-lock with --takeover is refused: the lock comes from the live old process") {
    std::ostringstream err;
    auto* saved = std::cerr.rdbuf(err.rdbuf());
    std::string prog = "nbdsched", brk = "--break-lock", take = "--takeover", path = "/run/h.sock";
    char* both[] = {prog.data(), brk.data(), take.data(), path.data(), nullptr};
    CliOptions options;
    auto code = daemon::parse_cli(4, both, options);
    std::cerr.rdbuf(saved);
    CHECK(code.value_or(0) != 0);
    CHECK(contains(err.str(), "--break-lock"));
    CHECK(contains(err.str(), "--takeover"));

    char* alone[] = {prog.data(), brk.data(), nullptr};
    CliOptions fail_over;
    CHECK_FALSE(daemon::parse_cli(2, alone, fail_over).has_value());
    CHECK(fail_over.break_lock);
}

TEST_CASE("an empty FILE or PATH is a usage error, not the option left out") {
    for (std::string option : {"--check-config", "-c", "--config", "--handover-socket", "--takeover"}) {
        CAPTURE(option);
        std::ostringstream err;
        auto* saved = std::cerr.rdbuf(err.rdbuf());
        std::string prog = "nbdsched", empty;
        char* argv[] = {prog.data(), option.data(), empty.data(), nullptr};
        CliOptions options;
        auto code = daemon::parse_cli(3, argv, options);
        std::cerr.rdbuf(saved);
        CHECK(code.value_or(0) != 0);
        CHECK(contains(err.str(), "an empty path"));
    }
    std::string prog = "nbdsched", check = "--check-config", file = "/etc/nbdsched/nbdsched.yaml";
    char* argv[] = {prog.data(), check.data(), file.data(), nullptr};
    CliOptions options;
    CHECK_FALSE(daemon::parse_cli(3, argv, options).has_value());
    CHECK(options.check_config_file == file);
}
