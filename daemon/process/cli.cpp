#include "daemon/process/cli.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>

namespace nbdsched::daemon {

std::optional<int> parse_cli(int argc, char** argv, CliOptions& options) {
    CLI::App app{"nbdsched: an NBD server with CFQ/BFQ-style I/O scheduling"};
    app.name("nbdsched");
    app.set_version_flag("--version", std::string("nbdsched ") + NBDSCHED_VERSION);
    app.add_option("-c,--config", options.config_file, "YAML configuration file (default: embedded default)");
    app.add_option("--check-config", options.check_config_file, "validate FILE, print every error, and exit");
    app.add_option("--log-level", options.log_level, "trace, debug, info, warn or error (default: the config's)")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
    app.add_option("--listen-unix", options.listen_unix, "listen on this unix socket (replaces the config's list)")
        ->type_name("PATH");
    app.add_option("--listen-tcp", options.listen_tcp, "listen on HOST:PORT (replaces the config's list)")
        ->type_name("HOST:PORT");
    app.footer("Signals: SIGTERM/SIGINT stop gracefully; SIGHUP is reserved for reload.\n"
               "See docs/nbdsched.md for the configuration file.");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return std::nullopt;
}

std::optional<config::Listen> parse_tcp_listen(const std::string& text) {
    auto colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size()) return std::nullopt;
    std::string host = text.substr(0, colon);
    if (host.front() == '[') {
        if (host.back() != ']') return std::nullopt;
        host = host.substr(1, host.size() - 2);
    }
    unsigned port = 0;
    auto port_text = std::string_view(text).substr(colon + 1);
    auto [end, ec] = std::from_chars(port_text.data(), port_text.data() + port_text.size(), port);
    if (ec != std::errc() || end != port_text.data() + port_text.size() || port > 65535) return std::nullopt;
    config::Listen l;
    l.kind = config::Listen::Kind::tcp;
    l.host = host;
    l.port = static_cast<std::uint16_t>(port);
    l.origin = config::Origin{"<command line>", 0, 0};
    return l;
}

bool apply_listen_overrides(const CliOptions& options, config::Config& config, std::string& error) {
    if (options.listen_unix.empty() && options.listen_tcp.empty()) return true;
    std::vector<config::Listen> listen;
    for (const auto& path : options.listen_unix) {
        config::Listen l;
        l.kind = config::Listen::Kind::unix_socket;
        l.path = path;
        l.origin = config::Origin{"<command line>", 0, 0};
        listen.push_back(l);
    }
    for (const auto& text : options.listen_tcp) {
        auto l = parse_tcp_listen(text);
        if (!l) {
            error = "--listen-tcp: expected HOST:PORT, got '" + text + "'";
            return false;
        }
        listen.push_back(*l);
    }
    config.listen = std::move(listen);
    return true;
}

} // namespace nbdsched::daemon
