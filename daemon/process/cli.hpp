// Command line of the nbdsched executable (CLI11). Kept stable: the
// integration tests and the systemd unit run `nbdsched --config FILE`.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"

namespace nbdsched::daemon {

struct CliOptions {
    std::string config_file;                // empty: the embedded default
    std::string check_config_file;          // --check-config: validate and exit
    std::string log_level;                  // empty: the config's
    std::vector<std::string> listen_unix;   // override the config's listen list
    std::vector<std::string> listen_tcp;    // HOST:PORT
    bool break_lock = false;                // rbd devices: take the image's lock from its holder
    std::string handover_socket;            // serve planned-restart hand-overs here
    std::string takeover;                   // take over from the daemon serving hand-overs here
    bool force = false;                     // --takeover although RAM devices lose their data
    bool fdstore_handover = false;          // SIGTERM under systemd: hand over through the fd store
};

// Parses argv; returns an exit code when the program should exit now
// (--help, --version, a usage error), nullopt to carry on.
std::optional<int> parse_cli(int argc, char** argv, CliOptions& options);

// Replaces the config's listen list when --listen-unix/--listen-tcp were given,
// each parsed as the config's `unix:` and `tcp:` keys are (config::parse_*_listen).
// False and `error` ("--listen-tcp '127.0.0.1:0': bad port ...") on a bad one.
bool apply_listen_overrides(const CliOptions& options, config::Config& config, std::string& error);

// --log-level over the config's log_level, at start and on every reload (a
// reloaded file's level must not undo the command line's).
void apply_log_level(const CliOptions& options, config::Config& config);

// --break-lock onto every rbd device of `config` (docs/rbd.md, fail-over).
void apply_break_lock(const CliOptions& options, config::Config& config);

}   // namespace nbdsched::daemon
