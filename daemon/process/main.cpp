// nbdsched: parse the command line, load the configuration, run the server.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <iostream>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include "config/config.hpp"
#include "daemon/process/attach_cli.hpp"
#include "daemon/process/build_version.hpp"
#include "daemon/process/check_config.hpp"
#include "daemon/process/cli.hpp"
#include "daemon/process/fdstore_handover.hpp"
#include "daemon/process/heap_tuning.hpp"
#include "daemon/control/client.hpp"
#include "daemon/process/server.hpp"
#include "daemon/process/storage_waits.hpp"
#include "daemon/process/systemd_notify.hpp"
#include "daemon/process/takeover.hpp"

using namespace nbdsched;

namespace {

void setup_logging(const std::string& level) {
    auto logger = spdlog::stderr_color_mt("nbdsched");
    // Under systemd the journal adds time and process; elsewhere we do.
    if (std::getenv("JOURNAL_STREAM"))
        logger->set_pattern("%l: %v");
    else
        logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] %v");
    spdlog::set_default_logger(logger);
    spdlog::set_level(spdlog::level::from_str(level));
    spdlog::flush_on(spdlog::level::info);
}

int report(const config::LoadResult& result) {
    for (const auto& e : result.errors) std::cerr << e.str() << "\n";
    return result.errors.empty() ? 0 : 1;
}

void print_how_to_connect(const daemon::Server& server) {
    std::string unix_uri, tcp_uri, unix_path, tcp_host;
    std::uint16_t tcp_port = 0;
    for (const auto& l : server.listeners()) {
        if (l->is_unix() && unix_uri.empty()) {
            unix_uri = l->uri("default");
            unix_path = l->unix_path();
        } else if (!l->is_unix() && tcp_uri.empty()) {
            tcp_uri = l->uri("default");
            tcp_host = l->tcp_host();
            tcp_port = l->tcp_port();
        }
    }
    std::string any = unix_uri.empty() ? tcp_uri : unix_uri;
    std::cerr << "\nnbdsched is serving a 1 GiB RAM export named 'default'. Connect with:\n";
    if (!unix_uri.empty()) std::cerr << "  nbdinfo '" << unix_uri << "'\n";
    if (!tcp_uri.empty()) std::cerr << "  nbdinfo '" << tcp_uri << "'\n";
    if (!unix_path.empty()) std::cerr << "  sudo nbd-client -unix " << unix_path << " /dev/nbd0 -N default\n";
    if (!tcp_host.empty()) std::cerr << "  sudo nbd-client " << tcp_host << " " << tcp_port << " /dev/nbd0 -N default\n";
    std::cerr << "  fio --ioengine=nbd --uri='" << any
              << "' --rw=randread --bs=4k --iodepth=64 --runtime=10 --time_based --name=x\n"
              << "Stop with Ctrl-C (SIGINT) or SIGTERM.\n\n";
}

// The old daemon parks its connections, then flushes, each for up to its
// limits.drain_timeout, before it answers. Its config is normally ours (the
// same file); never below 30 s so that an old daemon with the default 10 s
// gets its time even when this config has a shorter one.
std::chrono::milliseconds takeover_wait(std::chrono::milliseconds drain_timeout) {
    return std::max<std::chrono::milliseconds>(std::chrono::seconds(30), 2 * drain_timeout + std::chrono::seconds(10));
}

}   // namespace

int main(int argc, char** argv) {
    // `nbdsched ctl ...` talks to a running daemon's control socket.
    if (argc > 1 && std::string_view(argv[1]) == "ctl") return daemon::control::run_ctl(argc - 1, argv + 1);
    // `nbdsched attach` / `detach`: the kernel device as the daemon's client.
    if (argc > 1 && std::string_view(argv[1]) == "attach") return daemon::run_attach(argc - 1, argv + 1);
    if (argc > 1 && std::string_view(argv[1]) == "detach") return daemon::run_detach(argc - 1, argv + 1);
    daemon::CliOptions cli;
    if (auto code = daemon::parse_cli(argc, argv, cli)) return *code;
    // A write past RLIMIT_FSIZE (ulimit -f, LimitFSIZE=) raises SIGXFSZ,
    // whose default action ends the process with every device and
    // connection: ignored, the write fails with EFBIG instead, which is that
    // request's NBD_ENOSPC (as on io_uring, which never raises it) or a
    // start-up error naming the file.
    std::signal(SIGXFSZ, SIG_IGN);

    nbdsched::daemon::keep_large_buffers_mapped();

    if (!cli.check_config_file.empty()) return daemon::check_config(cli.check_config_file);

    config::Config config;
    bool embedded = cli.config_file.empty();
    if (embedded) {
        config = config::embedded_default();
    } else {
        auto result = config::load_file(cli.config_file);
        if (!result.config) {
            report(result);
            return 1;
        }
        config = std::move(*result.config);
    }
    daemon::apply_log_level(cli, config);
    setup_logging(config.log_level);
    daemon::apply_break_lock(cli, config);

    std::string error;
    if (!daemon::apply_listen_overrides(cli, config, error)) {
        spdlog::error("{}", error);
        return 2;
    }
    // A file without listen: had this checked when it loaded.
    if (auto why = config::default_listen_problem(); why && embedded && cli.listen_unix.empty() && cli.listen_tcp.empty()) {
        spdlog::error("{}: {}", config.source, *why);
        return 1;
    }
    daemon::ServerOptions options;
    // --takeover: a planned restart; the running daemon's listeners and
    // connections come once everything else is built.
    const bool taking_over = !cli.takeover.empty();
    options.takeover_pending = taking_over;
    options.handover_path = taking_over ? cli.takeover : cli.handover_socket;
    // Socket activation: systemd's sockets replace the configured listeners;
    // the fd store's entries are a hand-over from the previous start.
    auto inherited = daemon::inherited_sockets();
    std::string store_error;
    auto stored = daemon::take_from_fd_store(inherited, store_error);
    if (!store_error.empty()) spdlog::error("{}: starting without the previous process's connections", store_error);
    if (stored && !taking_over) options.handed_over = &*stored;
    if (cli.fdstore_handover && std::getenv("NOTIFY_SOCKET"))
        options.store_handover = daemon::push_to_fd_store;
    else if (cli.fdstore_handover)
        spdlog::warn("--fdstore-handover: not under systemd ($NOTIFY_SOCKET unset): SIGTERM stops as usual");
    for (const auto& s : inherited) {
        if (taking_over) {   // the same sockets come with the hand-over
            ::close(s.fd);
            continue;
        }
        if (s.kind == daemon::InheritedSocket::Kind::other) {
            spdlog::warn("ignoring inherited socket {}: not a listening stream socket", daemon::describe(s));
            ::close(s.fd);
            continue;
        }
        spdlog::info("socket activation: {}", daemon::describe(s));
        options.activated_fds.push_back(s.fd);
    }
    options.on_ready = [&config] {
        daemon::notify_ready("serving " + std::to_string(config.exports.size()) + " export(s)");
    };
    options.on_stopping = [] { daemon::notify_stopping(); };
    options.on_start_wait = [](std::chrono::seconds more, const std::string& status) {
        daemon::notify_start_wait(more, status);
    };
    options.reload_adjust = [cli](config::Config& c, std::string& e) {
        daemon::apply_log_level(cli, c);
        return daemon::apply_listen_overrides(cli, c, e);
    };
    std::unique_ptr<daemon::Takeover> takeover;   // outlives the server, which uses what it brought
    auto server = daemon::Server::create(config, options, error);
    if (!server) {
        spdlog::error("{}", error);
        return 1;
    }
    if (taking_over) {
        // Only now does the old daemon stop reading: the pause is the
        // exchange, not this process's start.
        takeover = daemon::Takeover::request(cli.takeover, cli.force, takeover_wait(config.limits.drain_timeout), error);
        if (!takeover) {
            spdlog::error("{}", error);
            server->undo_start();
            return 1;
        }
        if (!server->take_over(takeover->handed_over(), error)) {
            spdlog::error("{}", error);
            server->undo_start();      // before the old daemon serves on
            server.reset();            // its control socket and metrics port free again
            takeover->refuse(error);   // the old daemon serves on
            return 1;
        }
        if (!takeover->confirm(error)) {
            spdlog::error("hand-over not confirmed: {}; leaving the sockets to the old daemon", error);
            server->undo_start();
            return 1;
        }
    }
    if (stored && !taking_over) daemon::release_fd_store(*stored);
    spdlog::info("nbdsched {} using {}", daemon::build_version(), config.source);
    if (embedded) print_how_to_connect(*server);
    const int code = server->run();
    if (server->storage_stuck()) {
        // Closing that storage (rbd_close, joining the I/O threads) would wait for it as the flush did.
        spdlog::shutdown();
        std::_Exit(code);
    }
    // Even flushed, an image's close waits for the cluster (rbd_close
    // flushes librbd's cache, ends its watch, releases the lock): bounded
    // like the flush, the exit goes without it. Everything acknowledged as
    // durable is on the storage already.
    const auto bound = config.limits.drain_timeout;
    auto close_devices = [s = server.release()] { delete s; };
    if (!daemon::run_within("closing the devices", close_devices, bound)) {
        spdlog::error("closing the devices did not finish in {} ms (storage not answering); exiting without it",
                      bound.count());
        spdlog::shutdown();
        std::_Exit(1);
    }
    return code;
}
