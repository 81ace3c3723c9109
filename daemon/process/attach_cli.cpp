#include "daemon/process/attach_cli.hpp"

#include <CLI/CLI.hpp>
#include <functional>
#include <iostream>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "common/units.hpp"
#include "config/parsers.hpp"
#include "daemon/process/systemd_notify.hpp"
#include "kernel/attach.hpp"
#include "kernel/attach_record.hpp"
#include "kernel/device_use.hpp"
#include "kernel/monitor_lock.hpp"

namespace nbdsched::daemon {

namespace {

// A whole number of seconds from "120s", "2m"-style text ("500ms" is refused:
// the kernel's timeouts are in seconds).
CLI::Validator seconds_validator() {
    return CLI::Validator(
        [](std::string& text) -> std::string {
            auto d = parse_duration(text, std::chrono::seconds(1));
            if (!d || *d < std::chrono::seconds(1) || *d % std::chrono::seconds(1) != Nanos(0))
                return "'" + text + "': expected whole seconds such as 30s";
            text = std::to_string(std::chrono::duration_cast<std::chrono::seconds>(*d).count());
            return {};
        },
        "DURATION");
}

void setup_logging() {
    auto logger = spdlog::stderr_color_mt("nbdsched-attach");
    logger->set_pattern(std::getenv("JOURNAL_STREAM") ? "%l: %v" : "[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    spdlog::set_default_logger(logger);
    spdlog::flush_on(spdlog::level::info);
}

}   // namespace

int run_attach(int argc, char** argv) {
    CLI::App app{"Attach an nbdsched export to /dev/nbdN through the kernel's netlink interface and keep it "
                 "connected: when the daemon dies or restarts, reconnect within the dead-connection timeout"};
    app.name("nbdsched attach");
    kernel::AttachOptions o;
    std::string tcp, device;
    long timeout = 30, dead_timeout = 120;
    std::uint64_t block_size = 4096;
    bool no_monitor = false, wait_for_monitor = false;
    auto* unix_opt = app.add_option("--socket", o.target.unix_path, "the daemon's unix socket")->type_name("PATH");
    auto* tcp_opt = app.add_option("--tcp", tcp, "the daemon's TCP listener")->type_name("HOST:PORT");
    unix_opt->excludes(tcp_opt);
    app.add_option("--export", o.target.export_name, "export name (default: the server's default export)");
    auto* device_opt = app.add_option("--device", device, "/dev/nbdN to use (default: the next free one)");
    app.add_option("--connections", o.connections, "sockets per device (the export should offer multi-conn)")
        ->check(CLI::Range(1u, 16u));
    app.add_option("--timeout", timeout, "request timeout (NBD_ATTR_TIMEOUT); a request older than this is "
                                         "requeued onto a live connection")
        ->transform(seconds_validator())
        ->default_str("30s");
    app.add_option("--dead-conn-timeout", dead_timeout, "how long the kernel holds I/O while no connection is "
                                                        "alive (NBD_ATTR_DEAD_CONN_TIMEOUT)")
        ->transform(seconds_validator())
        ->default_str("120s");
    app.add_option("--block-size", block_size, "logical block size: 512, 1024, 2048 or 4096")
        ->check(CLI::IsMember({512, 1024, 2048, 4096}))
        ->default_str("4096");
    auto* no_monitor_opt =
        app.add_flag("--no-monitor", no_monitor, "exit after attaching (no reconnection when the daemon restarts)");
    app.add_flag("--wait-for-monitor", wait_for_monitor,
                 "with --device: when another monitor watches the device, wait for it to end and then take the "
                 "device over, instead of exiting 1 (the systemd unit's way)")
        ->excludes(no_monitor_opt)
        ->needs(device_opt);
    app.footer("Prints the device (/dev/nbdN) on stdout once attached, then stays running as the device's "
               "monitor until it is detached. Needs CAP_SYS_ADMIN and the nbd module. TLS listeners are not "
               "supported (the kernel speaks plaintext NBD): use a unix socket. See docs/restart.md.");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    setup_logging();
    std::string error;
    if (o.target.unix_path.empty() && tcp.empty()) {
        std::cerr << "nbdsched attach: --socket PATH or --tcp HOST:PORT is required\n";
        return 2;
    }
    if (!tcp.empty()) {
        auto hp = config::detail::parse_host_port(tcp, error);   // the listeners' own syntax
        if (!hp) {
            std::cerr << "nbdsched attach: --tcp '" << tcp << "': " << error << "\n";
            return 2;
        }
        o.target.host = hp->host;
        o.target.port = hp->port;
    }
    if (!device.empty()) {
        o.device.index = kernel::parse_device(device);
        if (!o.device.index) {
            std::cerr << "nbdsched attach: --device '" << device << "': expected /dev/nbdN\n";
            return 2;
        }
    }
    o.device.timeout = std::chrono::seconds(timeout);
    o.device.dead_conn_timeout = std::chrono::seconds(dead_timeout);
    o.device.block_size = block_size;

    auto netlink = kernel::Netlink::open(error);
    if (!netlink) {
        spdlog::error("{}", error);
        return 1;
    }
    // A monitor restarted on a device it attached before takes it over, unless
    // another monitor still watches it.
    std::optional<kernel::MonitorLock> lock;
    if (o.device.index && !no_monitor) {
        auto waiting = [&](const std::string& holder) {
            spdlog::info("{}: waiting for it to end, then taking the device over", holder);
            // Ready: the device is attached and watched, by the other monitor for now.
            notify_ready(holder + ": waiting for it to end");
        };
        lock = kernel::MonitorLock::take_waiting(kernel::record_directory(), *o.device.index,
                                                 wait_for_monitor ? waiting : std::function<void(const std::string&)>(),
                                                 error);
        if (!lock) {
            spdlog::error("{}", error);
            return 1;
        }
    }
    // Subscribed after the wait (the other monitor answered what died
    // meanwhile) and before the connect, so that a link dying right after it
    // is heard.
    auto events = no_monitor ? nullptr : kernel::LinkDeadEvents::open(error);
    if (!no_monitor && !events) {
        spdlog::error("{}", error);
        return 1;
    }
    std::optional<kernel::Attached> attached;
    bool adopted = false;
    if (o.device.index && !no_monitor) {
        adopted = (attached = kernel::adopt(*netlink, o, *o.device.index, error)).has_value();
        if (!adopted && !error.empty()) {
            spdlog::error("{}", error);
            return 1;
        }
    }
    if (!adopted) attached = kernel::attach(*netlink, o, error);
    if (!attached) {
        spdlog::error("{}", error);
        return 1;
    }
    std::cout << "/dev/nbd" << attached->index << std::endl;
    notify_ready("/dev/nbd" + std::to_string(attached->index) + ": export '" + o.target.export_name + "' at " +
                 o.target.describe());
    if (no_monitor) return 0;
    // A device the kernel chose: free until now, so no monitor can hold it;
    // locked for a later `attach --device` to see.
    if (!lock && !(lock = kernel::MonitorLock::take(kernel::record_directory(), attached->index, error)))
        spdlog::warn("{}", error);
    return kernel::monitor(*netlink, *events, o, *attached, adopted);
}

int run_detach(int argc, char** argv) {
    CLI::App app{"Disconnect /dev/nbdN (NBD_CMD_DISCONNECT); its `nbdsched attach` monitor then exits"};
    app.name("nbdsched detach");
    std::string device;
    bool force = false;
    app.add_option("device", device, "/dev/nbdN")->required();
    app.add_flag("--force", force, "detach even while the device is mounted, held or used as swap: what is "
                                   "written to it afterwards fails, a mounted filesystem loses what it had not "
                                   "written back");
    app.footer("Refuses (exit 1) a device that is not attached, and one that is in use unless --force.");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e);
    }
    auto index = kernel::parse_device(device);
    if (!index) {
        std::cerr << "nbdsched detach: '" << device << "': expected /dev/nbdN\n";
        return 2;
    }
    std::string error;
    auto netlink = kernel::Netlink::open(error);
    if (!netlink) {
        std::cerr << "nbdsched detach: " << device << ": " << error << "\n";
        return 1;
    }
    if (!kernel::is_attached(*netlink, *index, error)) {
        std::cerr << "nbdsched detach: " << device << " is not attached\n";
        return 1;
    }
    if (auto users = kernel::device_users(*index); !users.empty() && !force) {
        std::string list;
        for (const auto& u : users) list += (list.empty() ? "" : ", ") + u;
        std::cerr << "nbdsched detach: " << device << " is in use (" << list
                  << "): not detaching; unmount it first, or --force\n";
        return 1;
    }
    if (!netlink->disconnect(*index, error)) {
        std::cerr << "nbdsched detach: " << device << ": " << error << "\n";
        return 1;
    }
    kernel::remove_record(*index);   // its monitor does too, when it is running
    return 0;
}

}   // namespace nbdsched::daemon
