// `nbdsched ctl --socket PATH|--config FILE <list | get DEV TUNABLE | set DEV TUNABLE VALUE
//  | weight GROUP N | stats | faults DEV [on|off] | reserve GROUP [iops=N] [bps=SIZE]
//  | limit GROUP [iops=N] [bps=SIZE] [burst=DURATION] | latency-target GROUP DURATION|off
//  | reload [--pid PID]> [--json]`
#include <CLI/CLI.hpp>
#include <charconv>
#include <csignal>
#include <cstring>
#include <iostream>
#include <limits>
#include <optional>
#include <sys/types.h>

#include "common/json_text.hpp"
#include "config/config.hpp"
#include "daemon/control/client.hpp"
#include "daemon/control/render.hpp"
#include "sched/qos/spec.hpp"
#include "sched/weight.hpp"

namespace nbdsched::daemon::control {

namespace {

struct CtlArgs {
    std::string socket;
    std::string config;   // the socket from this file's control:
    pid_t pid = 0;        // reload: SIGHUP to this process when there is no control socket to connect to
    int timeout = 0;      // seconds to wait for the answer; 0: the command's default
    bool json = false;
    std::string device, tunable, value, group, faults_switch, target;
    std::vector<std::string> settings;   // reserve/limit: key=value
    std::string weight;                  // checked with the configuration's words
};

// "iops=200 bps=20MiB burst=100ms" (or nothing / "off": none) into the
// request. 0 on success; 2 for a malformed setting, 1 for a count out of
// range (the daemon's and the configuration's words).
int put_settings(const std::string& cmd, const std::vector<std::string>& settings, Json& req) {
    for (const auto& s : settings) {
        if (s == "off") continue;
        auto eq = s.find('=');
        std::string key = s.substr(0, eq), value = eq == std::string::npos ? "" : s.substr(eq + 1);
        if (eq != std::string::npos && req.contains(key)) {
            std::cerr << "nbdsched ctl " << cmd << ": " << key << " given twice\n";
            return 2;
        }
        if (key == "iops" && !value.empty() && value.find_first_not_of("0123456789") == std::string::npos) {
            std::uint64_t n = 0;
            if (std::from_chars(value.data(), value.data() + value.size(), n).ec != std::errc()) {
                std::cerr << "nbdsched ctl " << cmd << ": \"iops\": out of range: " << value << " (allowed "
                          << sched::qos::min_iops << ".." << sched::qos::max_iops << ")\n";
                return 1;
            }
            req["iops"] = n;
        } else if (key == "bps" && !value.empty()) {
            req["bps"] = value;
        } else if (key == "burst" && cmd == "limit" && !value.empty()) {
            req["burst"] = value;
        } else {
            std::cerr << "nbdsched ctl " << cmd << ": bad setting '" << s << "' (iops=N, bps=SIZE"
                      << (cmd == "limit" ? ", burst=DURATION" : "") << ", or off)\n";
            return 2;
        }
    }
    return 0;
}

// The control socket named by --socket, or by --config's `control:`;
// empty (and a message) when the file has none; nullopt (and its errors)
// when the file does not load.
std::optional<std::string> control_socket(const CtlArgs& a) {
    if (!a.socket.empty()) return a.socket;
    auto loaded = config::load_file(a.config);
    if (!loaded.config) {
        for (const auto& e : loaded.errors) std::cerr << e.str() << "\n";
        return std::nullopt;
    }
    if (loaded.config->control.empty()) std::cerr << "nbdsched ctl: " << a.config << " has no control: socket\n";
    return loaded.config->control;
}

// reload --pid when the control socket cannot be connected to (none, or
// nobody listening): what systemctl reload did before, SIGHUP; its outcome
// is only in the daemon's log. Never once the request was sent: the daemon
// may be reloading it, and a second reload could hide its refusal.
int reload_by_signal(pid_t pid, const std::string& why) {
    if (::kill(pid, SIGHUP) != 0) {
        std::cerr << "nbdsched ctl reload: " << why << ", and SIGHUP to " << pid << " failed: " << std::strerror(errno)
                  << "\n";
        return 2;
    }
    std::cerr << "nbdsched ctl reload: " << why << ": sent SIGHUP to " << pid
              << "; whether it applied is in the daemon's log\n";
    return 0;
}

int print_reply(const std::string& cmd, const Json& reply, bool json) {
    if (!reply.value("ok", false)) {
        std::cerr << "nbdsched ctl " << cmd << ": " << reply.value("error", std::string("failed")) << "\n";
        return 1;
    }
    if (json) {
        Json body = reply;
        body.erase("ok");
        std::cout << json_text(body, 2) << "\n";
    } else if (cmd == "list") {
        std::cout << render_list(reply);
    } else if (cmd == "stats") {
        std::cout << render_stats(reply);
    } else if (cmd == "faults") {
        std::cout << render_faults(reply);
    } else if (cmd == "reload") {
        for (const auto& m : reply.value("messages", Json::array())) std::cout << m.get<std::string>() << "\n";
    } else if (reply.contains("warnings")) {
        for (const auto& w : reply["warnings"]) std::cerr << "warning: " << w.get<std::string>() << "\n";
    } else if (reply.contains("value")) {
        std::cout << reply["value"].get<std::string>() << "\n";
    }
    return 0;
}

// The word given where a subcommand goes when it names none (`ctl bogus`):
// CLI11 reports only "A subcommand is required" for it.
std::optional<std::string> unknown_subcommand(CLI::App& app, const CLI::ParseError& e) {
    if (!dynamic_cast<const CLI::RequiredError*>(&e) && !dynamic_cast<const CLI::ExtrasError*>(&e)) return std::nullopt;
    if (!app.get_subcommands().empty()) return std::nullopt;
    for (const auto& word : app.remaining())
        if (!word.starts_with("-")) return word;
    return std::nullopt;
}

// "list, stats, get, ..." in the order --help gives them.
std::string subcommand_names(CLI::App& app) {
    std::string names;
    for (const auto* sub : app.get_subcommands([](CLI::App*) { return true; }))
        names += (names.empty() ? "" : ", ") + sub->get_name();
    return names;
}

}   // namespace

int run_ctl(int argc, char** argv) {
    CLI::App app{"nbdsched ctl: inspect and steer a running nbdsched through its control socket"};
    app.name("nbdsched ctl");
    CtlArgs a;
    auto* socket = app.add_option("-s,--socket", a.socket, "the daemon's control socket (config key `control:`)");
    auto* config = app.add_option("-c,--config", a.config, "or the configuration file whose `control:` it is");
    socket->excludes(config);
    app.add_flag("--json", a.json, "print the daemon's JSON reply instead of a table");
    app.add_option("--timeout", a.timeout, "seconds to wait for the daemon's answer (default 10; reload 80)")
        ->check(CLI::Range(1, 3600));
    app.require_subcommand(1);
    auto* list = app.add_subcommand("list", "devices, exports, groups and open queues");
    auto* stats = app.add_subcommand("stats", "counters per device, export, group and queue");
    auto* get = app.add_subcommand("get", "print a scheduler tunable of a device");
    get->add_option("device", a.device)->required();
    get->add_option("tunable", a.tunable)->required();
    auto* set = app.add_subcommand("set", "change a scheduler tunable of a device now (same units as the YAML)");
    set->add_option("device", a.device)->required();
    set->add_option("tunable", a.tunable)->required();
    set->add_option("value", a.value)->required();
    auto* weight = app.add_subcommand("weight", "change a group's weight on every device now");
    weight->add_option("group", a.group)->required();
    weight->add_option("weight", a.weight, "1..1000")->required();
    auto* faults = app.add_subcommand("faults", "show a device's fault injection; on/off switches it (keeps its counts)");
    faults->add_option("device", a.device)->required();
    faults->add_option("switch", a.faults_switch, "off: inject nothing; on: the configured rules again")
        ->check(CLI::IsMember({"on", "off"}));
    auto* reserve = app.add_subcommand("reserve", "set a group's reservation on every device now: iops=N bps=SIZE, or off");
    auto* limit = app.add_subcommand("limit", "set a group's limit on every device now: iops=N bps=SIZE burst=DURATION, or off");
    for (auto* sub : {reserve, limit}) {
        sub->add_option("group", a.group)->required();
        sub->add_option("settings", a.settings, "key=value pairs; none or off clears it");
    }
    auto* target = app.add_subcommand("latency-target", "set a group's latency target (p90) on every device now");
    target->add_option("group", a.group)->required();
    target->add_option("target", a.target, "a duration such as 50ms, or off")->required();
    auto* reload = app.add_subcommand("reload", "re-read the configuration file (as SIGHUP does) and wait: exit 0 "
                                                "when it is in force, 1 (with the reasons) when it was refused");
    reload->add_option("--pid", a.pid, "when the control socket cannot be connected to, send this process SIGHUP instead")
        ->check(CLI::Range(1, std::numeric_limits<pid_t>::max()).description("a process id"));
    for (auto* sub : {list, stats, get, set, weight, faults, reserve, limit, target, reload})
        sub->add_flag("--json", a.json, "print the JSON reply");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        if (auto word = unknown_subcommand(app, e)) {
            std::cerr << "nbdsched ctl: unknown subcommand '" << *word << "' (" << subcommand_names(app)
                      << ")\nRun with --help for more information.\n";
            return 2;
        }
        return app.exit(e) == 0 ? 0 : 2;
    }
    if (a.socket.empty() && a.config.empty()) {
        std::cerr << "nbdsched ctl: --socket or --config is required\n";
        return 2;
    }

    Json req;
    std::string cmd = app.get_subcommands().front()->get_name();
    req["cmd"] = cmd;
    if (cmd == "get" || cmd == "set" || cmd == "faults") req["device"] = a.device;
    if (cmd == "get" || cmd == "set") req["tunable"] = a.tunable;
    if (!a.faults_switch.empty()) req["enabled"] = a.faults_switch == "on";
    if (cmd == "set") req["value"] = a.value;
    if (cmd == "weight") {
        req["group"] = a.group;
        unsigned w = 0;
        if (auto why = sched::parse_weight(a.weight, w); !why.empty()) {
            std::cerr << "nbdsched ctl weight: \"weight\": " << why << "\n";
            return why.starts_with("out of range") ? 1 : 2;
        }
        req["weight"] = w;
    }
    if (cmd == "reserve" || cmd == "limit" || cmd == "latency-target") req["group"] = a.group;
    if (cmd == "reserve" || cmd == "limit")
        if (int rc = put_settings(cmd, a.settings, req)) return rc;
    if (cmd == "latency-target") req["target"] = a.target;
    const auto socket_path = control_socket(a);
    if (!socket_path && cmd == "reload") {
        // The daemon would read the same file and refuse it: no SIGHUP, and
        // the exit status of a refused reload (systemctl reload fails).
        std::cerr << "nbdsched ctl reload: " << a.config << " does not load: not reloading"
                  << (a.pid ? ", no SIGHUP sent to " + std::to_string(a.pid) : std::string()) << "\n";
        return 1;
    }
    const std::string path = socket_path.value_or("");
    if (path.empty()) return cmd == "reload" && a.pid ? reload_by_signal(a.pid, "no control socket") : 2;
    std::string error;
    bool connected = false;
    // A reload re-reads the file and may open devices: more than a query, and
    // under systemd's 90 s for ExecReload.
    const int timeout = a.timeout ? a.timeout : cmd == "reload" ? 80
                                                                : 10;
    auto line = request(path, json_text(req), error, timeout, &connected);
    if (!line && !connected) {
        if (cmd == "reload" && a.pid) return reload_by_signal(a.pid, error);
        std::cerr << "nbdsched ctl: " << error << "\n";
        return 2;
    }
    if (!line) {   // sent: the daemon may act on it still, so no SIGHUP on top
        std::cerr << "nbdsched ctl " << cmd << ": " << error << "; the request was sent and may still take effect"
                  << (cmd == "reload" ? " (see the daemon's log)" : "") << "\n";
        return 1;
    }
    try {
        return print_reply(cmd, Json::parse(*line), a.json);
    } catch (const Json::exception& e) {
        std::cerr << "nbdsched ctl: unreadable reply: " << e.what() << "\n";
        return 2;
    }
}

}   // namespace nbdsched::daemon::control
