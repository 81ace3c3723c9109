#include "daemon/process/server.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <csignal>
#include <spdlog/spdlog.h>
#include <system_error>

#include "common/undo_unless_dismissed.hpp"
#include "daemon/control/commands.hpp"
#include "daemon/control/qos.hpp"
#include "daemon/process/event_loop.hpp"
#include "daemon/process/handshake_room.hpp"
#include "daemon/process/placement.hpp"
#include "daemon/process/setup.hpp"

namespace nbdsched::daemon {

namespace {

void log_loops(const config::Config& config, std::size_t loops) {
    if (config.tls.enabled() && config.limits.threads > 1)
        spdlog::warn("limits.threads {}: one event loop, as TLS is configured (a TLS session cannot move to its "
                     "device's loop)",
                     config.limits.threads);
    if (loops == 1) return spdlog::info("event loops: 1");
    std::string where;
    for (std::size_t i = 0; i < config.devices.size(); ++i)
        where += (i ? ", " : "") + config.devices[i].name + " on " + std::to_string(i % loops);
    spdlog::info("event loops: {} (devices: {})", loops, where);
}

}   // namespace

Server::Server(const config::Config& config, ServerOptions options)
    : config_(config),
      options_(std::move(options)),
      io_(1),
      loops_(io_, event_loop_count(config_.limits.threads, config_.devices.size(), config_.tls.enabled(),
                                   config_.limits.spread_connections)),
      pool_(config_.limits.io_threads ? config_.limits.io_threads : 1),
      signals_(io_),
      drain_timer_(io_),
      handover_timer_(io_),
      takeback_timer_(io_),
      retake_timer_(io_) {}

Server::~Server() {
    // Pool tasks refer to devices and requests: let them end first.
    pool_.stop();
    pool_.join();
    // Devices before connections: a device's io_uring waits here for the
    // operations still in its ring, which read into and write from buffers
    // of the connections' requests (a forced stop leaves some there).
    // ~Connection touches nothing of a device.
    devices_.clear();
    connections_.clear();
}

std::unique_ptr<Server> Server::create(const config::Config& config, ServerOptions options, std::string& error) {
    std::unique_ptr<Server> s(new Server(config, std::move(options)));
    // A failure below undoes what opening the devices changed in their storage.
    UndoUnlessDismissed undo([server = s.get()] { server->undo_start(); });
    // Round-robin in config order: one device is one loop's (one core's) worth.
    for (std::size_t i = 0; i < s->config_.devices.size(); ++i) {
        auto& dev = s->config_.devices[i];
        dev.rbd.lock_later = s->options_.takeover_pending;   // the old process holds it until take_over
        dev.rbd.on_lock_wait = [raw = s.get(), name = dev.name](const backend::LockWait& w) { raw->lock_waited(name, w); };
        auto device = build_device(s->loops_.at(i % s->loops_.size()), s->pool_, dev, s->config_, error);
        if (!device) return nullptr;
        s->devices_.push_back(std::move(device));
    }
    log_loops(s->config_, s->loops_.size());
    if (!build_exports(s->config_, s->devices_, s->exports_, error)) return nullptr;
    s->groups_ = GroupTable(s->config_.groups);   // ids as build_device numbered them
    for (const auto& dev : s->devices_)
        for (const auto& w : control::qos_warnings(*dev, s->groups_)) spdlog::warn("{}", w);
    auto exclusive = [raw = s.get()](const std::function<void()>& f) { raw->loops_.exclusive(f); };
    s->state_ = control::DaemonState{&s->config_, &s->devices_, &s->exports_, &s->groups_, exclusive};
    s->state_.locks_lost = [raw = s.get()](const std::string& device) { return raw->lost_locks_.lost(device); };
    s->state_.reload = [raw = s.get()] { return raw->reload(); };
    s->context_.exclusive = exclusive;
    s->context_.open_queue = [raw = s.get()](std::uint64_t id, const PeerInfo& peer, const std::string& name,
                                             const ExportBinding& b, std::optional<sched::GroupId> keep) {
        return raw->open_queue(id, peer, name, b, keep);
    };
    if (s->config_.tls.enabled()) {
        s->tls_ = TlsContext::load(s->config_.tls, error);
        if (!s->tls_) {
            error = "tls: " + error;
            return nullptr;
        }
        s->context_.tls = s->tls_.get();
    }
    s->context_.exports = &s->exports_;
    s->context_.limits = s->config_.limits;
    // Posted from the connection's loop; the server's state is loop 0's.
    s->context_.on_finished = [raw = s.get()](Connection& c) {
        boost::asio::post(raw->io_, [raw, id = c.id(), loop = c.loop_index()] {
            raw->loops_.left(loop);
            raw->connection_finished(id);
        });
    };
    // Inside exclusive(): every loop sees a device shared from its next
    // handler on. A device with a timing model keeps its connections at
    // home: its replies are released by a timer on its home loop, so a
    // connection elsewhere would only add a hop between loops to every
    // request (bench exp1, 10 clients on the ssd profile: a quarter of the
    // IOPS lost).
    s->context_.place = [raw = s.get()](Device& d, std::size_t& index) -> boost::asio::io_context& {
        const auto home = raw->loops_.index_of(d.io());
        index = raw->loops_.place(home, raw->config_.limits.spread_connections && d.model() == nullptr);
        if (index != home) d.share_across_loops();
        return raw->loops_.at(index);
    };
    s->context_.on_parked = [raw = s.get()](Connection&) {
        boost::asio::post(raw->io_, [raw] { raw->exclusive([raw] { raw->check_handover(); }); });
    };
    // --takeover: the sockets come with the hand-over (take_over), after
    // everything else is built, so the old process pauses only for that.
    if (!s->options_.takeover_pending && !s->open_sockets(error)) return nullptr;
    undo.dismiss();
    return s;
}

void Server::undo_start() {
    for (auto& d : devices_) undo_open(d->name(), d->backend());
}

bool Server::take_over(const HandedOver& handed, std::string& error) {
    options_.handed_over = &handed;
    if (!acquire_exclusive(error)) return false;   // the old process let go before it sent
    return open_sockets(error);
}

// A dead holder's lock comes once the cluster drops its watch
// (osd_client_watch_timeout, 30 s by default): twice that, for a start that
// waits for it under systemd, whose start timeout would end it otherwise
// (90 s by default, from the start: several images, a slow cluster).
constexpr std::chrono::seconds k_lock_wait_allowance{60};

void Server::lock_waited(const std::string& device, const backend::LockWait& wait) {
    const bool waiting = wait.event == backend::LockWait::Event::waiting;
    if (waiting)
        spdlog::warn("device {}: {}", device, wait.message);
    else
        spdlog::info("device {}: {}", device, wait.message);
    if (waiting && !ready_ && options_.on_start_wait)
        options_.on_start_wait(k_lock_wait_allowance,
                               "device " + device + ": waiting for its image's lock, held by " + wait.holder);
}

namespace {

// systemd's socket unit says where an activated socket listens, not whether
// plaintext is meant there: a TCP one off loopback without TLS required
// needs insecure: true in a listen: entry, as the same address in listen:
// would (config::insecure_listener). nullopt when it may serve.
std::optional<std::string> insecure_activated(const Listener& l, const std::vector<config::Listen>& listen) {
    if (l.is_unix()) return std::nullopt;
    config::Listen as_configured = l.as_listen();
    as_configured.insecure = std::any_of(listen.begin(), listen.end(), [](const auto& w) { return w.insecure; });
    if (as_configured.insecure && !config::is_loopback(as_configured) && l.tls_mode() != nbd::TlsMode::require)
        spdlog::warn("{}: serving without TLS required (insecure: true in listen:): any host that reaches it can "
                     "read and write every export",
                     l.describe());
    auto why = config::insecure_listener(as_configured);
    if (!why) return std::nullopt;
    return l.describe() + ": " + *why +
           " (in a listen: entry of the config: activated sockets take its strictest tls:, and insecure: true from any "
           "entry)";
}

}   // namespace

// The listeners (bound, activated or handed over), then the control socket
// and metrics: the control socket last, since clients and tests take its
// first accepted connection as "the daemon is up" (its listening socket
// accepts from the kernel's backlog before run() starts anything).
bool Server::open_sockets(std::string& error) {
    if (options_.handed_over && !options_.handed_over->state.listeners.empty()) {
        if (!adopt_listeners(error)) return false;
    } else if (!options_.activated_fds.empty()) {
        for (int fd : options_.activated_fds) {
            auto l = Listener::adopt(io_, fd, error);
            if (!l) return false;
            // systemd's sockets carry no tls: of their own: the strictest
            // configured one applies, so activation never weakens it.
            for (const auto& where : config_.listen)
                if (where.tls != config::Listen::Tls::off && l->tls_mode() != nbd::TlsMode::require)
                    l->set_tls_mode(tls_mode_of(where));
            if (auto why = insecure_activated(*l, config_.listen)) {
                error = *why;
                return false;
            }
            listeners_.push_back(std::move(l));
        }
    } else {
        for (const auto& where : config_.listen) {
            auto l = Listener::open(io_, where, error);
            if (!l) return false;
            listeners_.push_back(std::move(l));
        }
    }
    if (listeners_.empty()) {
        error = "nothing to listen on";
        return false;
    }
    return open_endpoints(error);
}

bool Server::open_endpoints(std::string& error) {
    // The metrics port first: it answers 404 until its handler is registered,
    // and whoever waits for the control socket (tests, scripts) may scrape
    // as soon as that socket exists.
    if (!config_.metrics.empty()) {
        metrics_ = metrics::Endpoint::open(io_, config_.metrics, state_, error);
        if (!metrics_) return false;
    }
    if (!config_.control.empty()) {
        control_ = control::ControlServer::open(
            io_, config_.control,
            [this](const std::string& line) { return control::handle_line(line, state_); },   // pauses what it must
            error);
        if (!control_) return false;
    }
    return true;
}

void Server::accept(Socket socket, std::string peer, nbd::TlsMode tls_mode) {
    if (stopping_) return;   // the socket closes as it goes out of scope
    if (handing_over_) {     // accepted just as the listeners paused: the client connects again
        spdlog::info("closing connection from {}: accepted during a hand-over", peer);
        return;
    }
    if (connections_.size() >= config_.limits.max_connections &&
        held_connections() >= config_.limits.max_connections) {
        spdlog::warn("refusing connection from {}: max_connections ({}) reached", peer,
                     config_.limits.max_connections);
        return;
    }
    auto id = next_id_++;
    // Now, not at export selection: the client's process may exit or move
    // to another cgroup meanwhile.
    auto identity = peer_info(socket.native_handle());
    make_handshake_room(identity, peer);
    auto c = std::make_shared<Connection>(std::move(socket), id, std::move(peer), std::move(identity), context_, tls_mode);
    connections_.emplace(id, c);
    c->start();
}

// A connection the daemon closed in the handshake has let go of its socket
// and holds no device, but leaves connections_ a handler or two later (its
// aborted read comes back, then on_finished is posted): counted, it would
// refuse a client that reconnects as soon as it sees the close. One closed
// in transmission counts until it finishes: its requests may still be at
// the device. Both tests read only what loop 0 writes (device_ is set
// there; closed_ of a handshake too, since handshakes run on loop 0).
std::size_t Server::held_connections() const {
    return std::count_if(connections_.begin(), connections_.end(), [](const auto& entry) {
        return entry.second->in_transmission() || entry.second->in_handshake();
    });
}

// Handshakes run on this loop (connections move to their own loop only in
// transmission), so closing one here is safe.
void Server::make_handshake_room(const PeerInfo& newcomer, const std::string& peer) {
    const auto in_handshake = std::count_if(connections_.begin(), connections_.end(),
                                            [](const auto& entry) { return entry.second->in_handshake(); });
    if (static_cast<std::size_t>(in_handshake) < config_.limits.max_handshakes) return;
    std::vector<std::pair<std::uint64_t, std::string>> handshakes;
    for (const auto& [id, c] : connections_)
        if (c->in_handshake()) handshakes.emplace_back(id, handshake_peer(c->peer_identity()));
    auto victim = handshake_to_close(handshakes, handshake_peer(newcomer));
    if (!victim) return;
    connections_.at(*victim)->close(fmt::format("max_handshakes ({}) connections were in the handshake: the oldest of "
                                                "the peer holding the most closes for a new one from {}",
                                                config_.limits.max_handshakes, peer),
                                    spdlog::level::warn);
}

int Server::run() {
    adopt_connections();
    for (auto& l : listeners_) {
        l->start([this, mode = l->tls_mode()](Socket s, std::string peer) {
            accept(std::move(s), std::move(peer), mode);
        });
        spdlog::info("listening on {}{}", l->describe(),
                     l->tls_mode() == nbd::TlsMode::require ? " (TLS required)"
                     : l->tls_mode() == nbd::TlsMode::on    ? " (TLS offered)"
                                                            : "");
    }
    for (const auto& where : config_.listen)
        if (where.insecure && !config::is_loopback(where) && where.tls != config::Listen::Tls::require)
            spdlog::warn("{}: listening on {}:{} without TLS required (insecure: true): any host that reaches it "
                         "can read and write every export",
                         where.origin.str(), where.host, where.port);
    if (options_.handle_signals) {
        signals_.add(SIGINT);
        signals_.add(SIGTERM);
        signals_.add(SIGHUP);
        wait_signal();
    }
    if (control_) control_->start();
    if (metrics_) metrics_->start();
    open_handover();
    // Every loop runs before the daemon says it is ready: a connection placed
    // on another loop right after is served at once, and whoever counts the
    // daemon's threads after READY finds them all.
    loops_.start(config_.limits);
    spdlog::info("nbdsched: ready");
    ready_ = true;
    if (options_.on_ready) options_.on_ready();
    LoopStats loop;
    run_event_loop(io_, config_.limits, loop);
    loops_.stop();
    wait_for_storage();
    loop += loops_.stats();
    if (const auto& poll = config_.limits.busy_poll; poll.window.count() != 0) {
        spdlog::info("event loop: busy_poll {}{}us: {} sleeps avoided, {} sleeps{}{}", poll.adaptive ? "auto " : "",
                     poll.window.count(), loop.polls_with_work, loop.sleeps,
                     poll.adaptive ? ", stopped polling " + std::to_string(loop.backoffs) + " times" : "",
                     loops_.size() > 1 ? " (" + std::to_string(loops_.size()) + " loops)" : "");
    }
    if (const auto& nap = config_.limits.coalesce; nap.window.count() != 0)
        spdlog::info("event loop: coalesce {}{}us: {} naps{}", nap.adaptive ? "auto " : "", nap.window.count(), loop.naps,
                     nap.adaptive ? ", tried " + std::to_string(loop.nap_trials) + " times, kept " +
                                        std::to_string(loop.naps_kept) + ", lengthened " +
                                        std::to_string(loop.naps_lengthened)
                                  : "");
    spdlog::info("nbdsched: stopped");
    return exit_code_;
}

void Server::stop() {
    boost::asio::post(io_, [this] { exclusive([this] { begin_shutdown("stop requested"); }); });
}

control::ReloadResult Server::reload() {
    control::ReloadResult result;
    exclusive([&] {
        result = reload_config(state_, options_.reload_adjust, tls_.get());
        // The one limit a reload applies (reload_plan.cpp does not compare
        // it): connections read it on their loops, all paused here.
        if (result.applied && context_.limits.stall_timeout != config_.limits.stall_timeout) {
            context_.limits.stall_timeout = config_.limits.stall_timeout;
            for (auto& [id, c] : connections_) c->stall_timeout_changed();
        }
    });
    if (result.applied) sizes_.start();
    return result;
}

void Server::wait_signal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
        if (ec) return;
        bool again = true;
        exclusive([&] {
            if (sig == SIGHUP) {
                reload();
            } else if (stopping_ || (handing_over_ && to_store_)) {   // the fd store's hand-over is a stop too
                spdlog::warn("{} again: stopping without waiting for in-flight requests",
                             sig == SIGINT ? "SIGINT" : "SIGTERM");
                begin_shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");   // ends that hand-over
                finish_shutdown();
                again = false;
            } else if (sig == SIGTERM && options_.store_handover && !handing_over_) {
                stop_by_handover();
            } else {
                begin_shutdown(sig == SIGINT ? "SIGINT" : "SIGTERM");
            }
        });
        if (again) wait_signal();
    });
}

void Server::begin_shutdown(const std::string& why) {
    if (stopping_) return;
    stopping_ = true;   // first: a hand-over ended here must not start another shutdown
    if (handing_over_) abort_handover("shutting down");
    unpark_held(false);   // held for a take-back of locks: they finish as the others do
    pause_retakes();
    spdlog::info("{}: shutting down ({} connection(s) open)", why, connections_.size());
    if (options_.on_stopping) options_.on_stopping();
    for (auto& l : listeners_) l->close();
    if (control_) control_->close();
    if (metrics_) metrics_->close();
    if (handover_) handover_->close();
    // Copy: a connection may finish (and leave the map) inside shutdown().
    auto open = connections_;
    for (auto& [id, c] : open) c->shutdown();
    drain_timer_.expires_after(config_.limits.drain_timeout);
    drain_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        spdlog::warn("{} connection(s) still busy after {} ms; closing them", connections_.size(),
                     config_.limits.drain_timeout.count());
        exclusive([this] { finish_shutdown(); });
    });
    check_drained();
}

void Server::check_drained() {
    if (!stopping_ || stopped_ || !connections_.empty()) return;
    for (auto& d : devices_)
        if (d->outstanding() != 0) return;
    finish_shutdown();
}

void Server::connection_finished(std::uint64_t id) {
    connections_.erase(id);
    if (leaving_ && !handshakes_left()) return io_.stop();   // handed over: the last handshake answered
    // Both read devices and connections of every loop.
    if (stopping_ || handing_over_)
        exclusive([this] {
            check_drained();
            check_handover();
        });
}

void Server::finish_shutdown() {
    if (stopped_) return;
    stopped_ = true;
    drain_timer_.cancel();
    auto open = connections_;
    for (auto& [id, c] : open) c->close("server stopping");
    for (const auto& [name, lost] : lost_locks_.all())
        spdlog::warn("device {}: stopping without its lock (taking it back failed {} time(s)): nothing to flush", name,
                     lost.failures);
    auto flushed = flushes_.wait(flushes_.start_each(devices_, flush_job()), config_.limits.drain_timeout);
    for (const auto& failure : flushed.failed) {
        spdlog::error("device {}: flush at shutdown failed: {}", failure.device,
                      std::system_category().message(failure.error));
        exit_code_ = 1;
    }
    for (const auto& name : flushed.unfinished) {
        spdlog::error("device {}: the flush at shutdown did not finish in {} ms (storage not answering); exiting "
                      "without it: writes acknowledged since its last FLUSH, without FUA, may be lost, as in a crash",
                      name, config_.limits.drain_timeout.count());
        exit_code_ = 1;
        storage_stuck_ = true;
    }
    boost::system::error_code ignored;
    signals_.cancel(ignored);
    io_.stop();
}

// What may still wait for a storage that does not answer when the loops
// have stopped: the I/O pool's tasks (a reload's size read, a forced
// shutdown's requests on a blocking device) and a flush a failed hand-over
// left behind. Each is bounded (drain_timeout) or known to be stuck: then
// the exit goes without closing the devices (storage_stuck), as after a
// final flush that did not finish.
void Server::wait_for_storage() {
    const auto ms = config_.limits.drain_timeout.count();
    if (storage_stuck_) {   // the final flush did not finish: the exit is _Exit anyway, no second wait
        for (const auto& name : sizes_.reading())
            spdlog::error("device {}: the size read of a reload has not finished either; exiting without it", name);
        return;   // the final flush's report names the devices it left
    }
    if (!join_within(pool_, config_.limits.drain_timeout)) {
        storage_stuck_ = true;
        exit_code_ = 1;
        bool named = false;
        for (const auto& d : devices_) {
            if (!d->backend().blocking() || d->outstanding() == 0) continue;
            named = true;
            spdlog::error("device {}: {} request(s) still waiting for the storage {} ms after the stop (storage not "
                          "answering); exiting without them",
                          d->name(), d->outstanding(), ms);
        }
        for (const auto& name : sizes_.reading()) {
            named = true;
            spdlog::error("device {}: the size read of a reload did not finish in {} ms (storage not answering); "
                          "exiting without it",
                          name, ms);
        }
        if (!named)
            spdlog::error("the I/O thread pool still waits for the storage {} ms after the stop; exiting without it",
                          ms);
    }
    for (const auto& name : flushes_.running()) {
        spdlog::error("device {}: {} of a failed hand-over still waits for the storage; exiting without it", name,
                      left_behind(name));
        storage_stuck_ = true;
        exit_code_ = 1;
    }
}

sched::QueueId Server::open_queue(std::uint64_t connection, const PeerInfo& peer, const std::string& export_name,
                                  const ExportBinding& binding, std::optional<sched::GroupId> keep_group) {
    auto group = keep_group ? *keep_group : place_connection(state_, peer, export_name, binding.group);
    auto queue = binding.device->open_queue(group);
    binding.device->stats().open_queue(queue, {export_name, group, peer.describe()});
    spdlog::debug("conn {}: queue {} in group {}", connection, queue, groups_.name_of(group));
    return queue;
}

}   // namespace nbdsched::daemon
