#include "daemon/process/cli.hpp"

#include <CLI/CLI.hpp>
#include <iostream>

#include "daemon/process/build_version.hpp"

namespace nbdsched::daemon {

namespace {
// A path given empty (`-c "$CONF"` with CONF unset) is a usage error, not
// "not given": -c "" would serve the embedded default, --check-config ""
// would start a server, --takeover "" would start beside the running daemon.
const CLI::Validator non_empty_path(
    [](const std::string& value) { return value.empty() ? std::string("an empty path") : std::string(); }, "");
}   // namespace

std::optional<int> parse_cli(int argc, char** argv, CliOptions& options) {
    CLI::App app{"nbdsched: an NBD server with CFQ/BFQ-style I/O scheduling"};
    app.name("nbdsched");
    app.set_version_flag("--version", std::string("nbdsched ") + build_version());
    app.add_option("-c,--config", options.config_file, "YAML configuration file (default: embedded default)")
        ->check(non_empty_path);
    app.add_option("--check-config", options.check_config_file, "validate FILE, print every error, and exit")
        ->check(non_empty_path);
    app.add_option("--log-level", options.log_level, "trace, debug, info, warn or error (default: the config's)")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}));
    app.add_option("--listen-unix", options.listen_unix, "listen on this unix socket (replaces the config's list)")
        ->type_name("PATH");
    app.add_option("--listen-tcp", options.listen_tcp, "listen on HOST:PORT (replaces the config's list)")
        ->type_name("HOST:PORT");
    app.add_option("--handover-socket", options.handover_socket,
                   "serve planned restarts on this unix socket: a new process started with --takeover PATH takes "
                   "over every listener and live connection (docs/restart.md)")
        ->type_name("PATH")
        ->check(non_empty_path);
    auto* takeover = app.add_option("--takeover", options.takeover,
                                    "take over the listeners and live connections of the daemon serving hand-overs "
                                    "on PATH (it exits once this process has them), then serve hand-overs there")
                         ->type_name("PATH")
                         ->check(non_empty_path);
    app.add_flag("--force", options.force, "--takeover even when RAM devices lose their contents")->needs(takeover);
    // A hand-over passes the lock from the old process, which is alive: breaking it would blocklist the
    // process that is handing over its connections (docs/rbd.md).
    app.add_flag("--break-lock", options.break_lock,
                 "rbd devices: break the image's exclusive lock if another client holds it (fail-over after "
                 "that host died; the old holder is blocklisted)")
        ->excludes(takeover);
    app.add_flag("--fdstore-handover", options.fdstore_handover,
                 "under systemd (FileDescriptorStoreMax=): SIGTERM parks the live connections and passes them "
                 "to the next start through the fd store instead of closing them");
    app.footer("Subcommands (each has its own --help):\n"
               "  nbdsched ctl       inspect and steer a running daemon through its control socket\n"
               "  nbdsched attach    attach an export to /dev/nbdN and reconnect it across daemon restarts\n"
               "  nbdsched detach    disconnect /dev/nbdN (its attach monitor then exits)\n"
               "\n"
               "Signals: SIGTERM/SIGINT stop gracefully; SIGHUP reloads the configuration file.\n"
               "See docs/nbdsched.md for the manual, docs/configuration.md for the configuration file.");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    return std::nullopt;
}

void apply_log_level(const CliOptions& options, config::Config& config) {
    if (!options.log_level.empty()) config.log_level = options.log_level;
}

void apply_break_lock(const CliOptions& options, config::Config& config) {
    for (auto& device : config.devices) device.rbd.break_lock = options.break_lock;
}

bool apply_listen_overrides(const CliOptions& options, config::Config& config, std::string& error) {
    if (options.listen_unix.empty() && options.listen_tcp.empty()) return true;
    std::vector<config::Listen> listen;
    auto add = [&](const char* option, const std::string& text, auto parse) {
        std::string why;
        auto l = parse(text, why);
        if (!l) {
            error = std::string(option) + " '" + text + "': " + why;
            return false;
        }
        if (auto insecure = config::insecure_listener(*l)) {
            // The command line has no tls: or insecure:; a config file does.
            error = std::string(option) + " '" + text + "': " + *insecure + " (in a config file's listen:)";
            return false;
        }
        for (const auto& earlier : listen) {
            if (config::same_endpoint(earlier, *l)) {
                error = std::string(option) + " '" + text + "': listed twice";
                return false;
            }
        }
        if (l->kind == config::Listen::Kind::unix_socket && !config.control.empty() &&
            config::same_socket_path(l->path, config.control)) {
            error = std::string(option) + " '" + text + "': the path of the control socket (control: in the config)";
            return false;
        }
        l->origin = config::Origin{"<command line>", 0, 0};
        listen.push_back(*l);
        return true;
    };
    for (const auto& path : options.listen_unix)
        if (!add("--listen-unix", path, config::parse_unix_listen)) return false;
    for (const auto& text : options.listen_tcp)
        if (!add("--listen-tcp", text, config::parse_tcp_listen)) return false;
    config.listen = std::move(listen);
    return true;
}

}   // namespace nbdsched::daemon
