// Server's part in a planned restart (docs/restart.md). The old process:
// begin_handover parks every plaintext connection at a request boundary
// (TLS ones are closed after answering what they read; the next step of
// those still in the handshake waits for the outcome), check_handover
// passes listeners and parked connections once all are parked and the
// devices are flushed, finish_handover answers the handshakes
// NBD_REP_ERR_SHUTDOWN, as in a stop, and exits without touching the
// sockets; abort_handover serves on, the handshakes too. The flush, then the
// release of the devices' locks, run off the loops (storage_waits.hpp),
// each bounded by drain_timeout like the parking: a device whose storage
// does not answer fails the hand-over, it does not freeze loop 0. After a
// failed hand-over the locks are taken back off the loops too, unbounded
// (a lock comes back when the cluster answers) but leaving loop 0 free;
// no next hand-over begins while one is being taken back, and one that
// failed is tried again until it is back (server_takeback.cpp). The new process:
// adopt_listeners and adopt_connections take what was passed.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <spdlog/spdlog.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <system_error>
#include <unistd.h>
#include <utility>

#include "daemon/control/live_changes.hpp"
#include "daemon/process/server.hpp"
#include "daemon/session/socket_file.hpp"

namespace nbdsched::daemon {

namespace {
const char* tls_name(nbd::TlsMode mode) {
    return mode == nbd::TlsMode::require ? "require" : mode == nbd::TlsMode::on ? "on"
                                                                                : "off";
}
}   // namespace

// The old process's listening sockets, under this process's `listen:`: one
// it still lists keeps its socket (clients in the backlog stay) and takes
// the entry's tls: and the unix file's mode/owner/group; one it no longer
// lists is closed; an entry nothing was handed over for is bound. What
// touches the socket files waits for run(), after the old process let go.
bool Server::adopt_listeners(std::string& error) {
    const auto& handed = *options_.handed_over;
    std::vector<bool> bound(config_.listen.size(), false);
    for (const auto& ls : handed.state.listeners) {
        auto l = Listener::adopt(io_, handed.fds[static_cast<std::size_t>(ls.fd)], error, "handed over");
        if (!l) return false;
        const auto self = l->as_listen();
        std::size_t i = 0;
        while (i < config_.listen.size() && (bound[i] || !config::same_endpoint(config_.listen[i], self))) ++i;
        if (i == config_.listen.size()) {
            once_handed_over_.push_back([l = std::shared_ptr<Listener>(std::move(l))] {
                spdlog::warn("hand-over: {} is not in this configuration's listen: closed (clients waiting in its "
                             "backlog are dropped)",
                             l->describe());
                const std::string path = l->is_unix() ? l->unix_path() : "";
                l->close();
                if (!path.empty() && not_a_socket(path).empty()) ::unlink(path.c_str());
            });
            continue;
        }
        bound[i] = true;
        const auto& where = config_.listen[i];
        l->set_tls_mode(tls_mode_of(where));
        if (ls.tls_mode != l->tls_mode())
            spdlog::info("hand-over: {}: tls: {} (was {})", l->describe(), tls_name(l->tls_mode()),
                         tls_name(ls.tls_mode));
        if (l->is_unix())
            once_handed_over_.push_back([l = l.get(), where] {
                std::string why;
                if (!l->apply_permissions(where, why)) spdlog::error("hand-over: {}", why);
            });
        listeners_.push_back(std::move(l));
    }
    for (std::size_t i = 0; i < config_.listen.size(); ++i) {
        if (bound[i]) continue;
        auto l = Listener::open(io_, config_.listen[i], error);
        if (!l) return false;
        spdlog::info("hand-over: {} is new in this configuration: bound", l->describe());
        listeners_.push_back(std::move(l));
    }
    return true;
}

// A handed-over plaintext connection that came in through a listener
// requiring TLS now: not carried on.
bool Server::requires_tls_now(int fd) const {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return false;
    for (const auto& l : listeners_) {
        if (l->tls_mode() != nbd::TlsMode::require) continue;
        if (ss.ss_family == AF_UNIX) {
            if (l->is_unix() && config::same_socket_path(reinterpret_cast<sockaddr_un*>(&ss)->sun_path, l->unix_path()))
                return true;
            continue;
        }
        const auto port = ntohs(ss.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&ss)->sin_port
                                                        : reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port);
        if (!l->is_unix() && l->tcp_port() == port) return true;   // by port alone: errs towards closing
    }
    return false;
}

void Server::adopt_connections() {
    if (!options_.handed_over) return;
    for (const auto& step : std::exchange(once_handed_over_, {})) step();
    const auto& handed = *options_.handed_over;
    exclusive([&] { control::apply_live_changes(state_, handed.state.live_changes); });
    for (const auto& cs : handed.state.connections) {
        const int fd = handed.fds[static_cast<std::size_t>(cs.fd)];
        if (requires_tls_now(fd)) {
            spdlog::warn("conn {} ({}): plaintext, on a listener that requires TLS in this configuration: closed",
                         cs.id, cs.peer);
            ::close(fd);
            continue;
        }
        boost::system::error_code ec;
        Socket socket(io_);
        if (!adopt_socket(io_, fd, socket, ec)) {
            spdlog::error("conn {} ({}): cannot adopt its socket: {}", cs.id, cs.peer, ec.message());
            ::close(fd);
            continue;
        }
        // Ids go on from the old process's, so logs of both read as one.
        next_id_ = std::max(next_id_, cs.id + 1);
        std::optional<sched::GroupId> group;
        if (!cs.group.empty()) group = groups_.find(cs.group);
        auto c = std::make_shared<Connection>(std::move(socket), cs.id, cs.peer, cs.identity, context_);
        connections_.emplace(cs.id, c);
        c->resume(cs, group);
    }
    spdlog::info("hand-over: adopted {} listener(s) and {} connection(s)", handed.state.listeners.size(),
                 handed.state.connections.size());
}

void Server::open_handover() {
    if (options_.handover_path.empty()) return;
    HandoverServer::Hooks hooks;
    hooks.begin = [this](bool force) {
        std::string refused;
        exclusive([&] { refused = begin_handover(HandoverTo::takeover, force); });
        return refused;
    };
    hooks.abort = [this](const std::string& why) { exclusive([&] { abort_handover(why); }); };
    hooks.done = [this] { exclusive([this] { finish_handover(); }); };
    std::string error;
    handover_ = HandoverServer::open(io_, options_.handover_path, options_.handed_over != nullptr, hooks, error);
    if (!handover_) {
        spdlog::error("{}: planned restarts through it are not possible", error);
        return;
    }
    handover_->start();
    spdlog::info("serving hand-overs on {}", options_.handover_path);
}

std::string Server::begin_handover(HandoverTo to, bool force) {
    if (stopping_) return "the daemon is shutting down";
    if (handing_over_) return "a hand-over is already in progress";
    // Its release would run beside a take-back (or a late one) on the same device.
    if (!taking_back_.empty())
        return "device " + taking_back_.front() +
               ": taking back its lock after an earlier hand-over has not finished (storage not answering)";
    if (abandoned_release_ != 0 && !abandoned_devices_.empty())
        return "device " + abandoned_devices_.front() +
               ": the lock release of an earlier hand-over has not finished (storage not answering)";
    for (const auto& dev : config_.devices) {
        if (dev.backend != config::BackendKind::ram) continue;
        // One RAM device refuses the whole hand-over: say what the admin can
        // do on the path taken (systemd's restart has no --force).
        if (!force && to == HandoverTo::fd_store)
            return "device '" + dev.name + "' keeps its data in RAM, which a new process starts empty, so every " +
                   "connection closes, on every device; to keep connections across `systemctl restart`, make '" + dev.name +
                   "' a file device (backend: file) or remove it";
        if (!force)
            return "device '" + dev.name + "' keeps its data in RAM, which a new process starts empty; " +
                   "--takeover with --force replaces it anyway";
        spdlog::warn("hand-over: device '{}' is RAM: its contents are lost (--force)", dev.name);
    }
    // Between two tries to take a lost lock back no thread touches the
    // device and it holds no lock: nothing to release, and the new process
    // (a cluster connection of its own) may get the lock where this one
    // cannot. The tries pause meanwhile (server_takeback.cpp).
    for (const auto& [name, lost] : lost_locks_.all())
        spdlog::info("hand-over: device {} has no lock to hand over (taking it back failed {} time(s)); the new "
                     "process takes it",
                     name, lost.failures);
    pause_retakes();
    handing_over_ = true;
    handover_sent_ = false;
    to_store_ = false;
    locks_released_ = false;
    spdlog::info("hand-over: parking {} connection(s) at request boundaries", connections_.size());
    for (auto& l : listeners_) l->pause();
    // The new process binds these itself.
    if (control_) control_->close();
    if (metrics_) metrics_->close();
    control_.reset();
    metrics_.reset();
    auto open = connections_;   // a connection may finish inside close()
    for (auto& [id, c] : open) {
        // A TLS session cannot move: answered, then closed. A handshake is
        // not handed over either, but a failed hand-over must not have sent
        // it away: its next step waits until the outcome is known.
        if (c->in_handshake())
            c->hold_handshake();
        else if (!c->in_transmission() || c->tls_active())
            c->shutdown();
        else
            c->park();
    }
    handover_timer_.expires_after(config_.limits.drain_timeout);
    handover_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec || !handing_over_ || handover_sent_ || handover_flush_) return;   // flushing: its own timeout
        exclusive([this] {
            fail_handover("connections not at a request boundary within " +
                          std::to_string(config_.limits.drain_timeout.count()) + " ms");
        });
    });
    boost::asio::post(io_, [this] { exclusive([this] { check_handover(); }); });
    return "";
}

void Server::check_handover() {
    if (!handing_over_ || handover_sent_ || handover_flush_) return;
    for (const auto& [id, c] : connections_)
        if (!c->parked() && !c->in_handshake()) return;
    // A flush an earlier hand-over left behind still runs on that device:
    // it must not go to the new process while this one still flushes it.
    if (auto busy = flushes_.running(); !busy.empty())
        return fail_handover("device " + busy.front() + ": " + left_behind(busy.front()) +
                             " of an earlier hand-over has not finished (storage not answering)");
    // Off the loops: a flush waits as long as the storage does, and loop 0
    // must stay free to give up after drain_timeout and serve on.
    const auto round = ++handover_round_;
    handover_releasing_ = false;
    handover_flush_ = flushes_.start_each(devices_, flush_job(), [this, round] {
        boost::asio::post(io_, [this, round] { exclusive([this, round] { handover_flushed(round); }); });
    });
    wait_handover_round(round, "flush");
}

// The round of flushes or lock releases `round` fails the hand-over when a
// device has not answered within drain_timeout.
void Server::wait_handover_round(std::uint64_t round, const std::string& what) {
    handover_timer_.expires_after(config_.limits.drain_timeout);
    handover_timer_.async_wait([this, round, what](const boost::system::error_code& ec) {
        if (ec) return;
        exclusive([this, round, what] {
            if (round != handover_round_ || !handover_flush_) return;
            auto unfinished = flushes_.outcome(handover_flush_).unfinished;
            if (unfinished.empty()) return handover_flushed(round);   // its answer is on the way
            fail_handover("device " + unfinished.front() + ": " + what + " did not finish within " +
                          std::to_string(config_.limits.drain_timeout.count()) + " ms (storage not answering)");
        });
    });
}

// Every device's flush, then every device's lock release, is back (loop 0, exclusive).
void Server::handover_flushed(std::uint64_t round) {
    if (round == abandoned_release_ && !handing_over_) {
        // The cluster answered the release after all: take the locks back
        // (only now, so that no acquire runs beside a release on a device).
        abandoned_release_ = 0;
        const auto names = std::exchange(abandoned_devices_, {});
        if (stopping_) return;   // the images close: no lock to take back
        spdlog::info("hand-over: the lock release given up on has ended; taking the locks back");
        return take_back_locks(names);
    }
    if (round != handover_round_ || !handover_flush_ || !handing_over_ || handover_sent_) return;
    const bool released = std::exchange(handover_releasing_, false);
    const auto outcome = flushes_.outcome(std::exchange(handover_flush_, nullptr));
    if (!outcome.failed.empty()) {
        const auto& failure = outcome.failed.front();
        if (released) return fail_handover(release_errors_->at(failure.device));
        return fail_handover("device " + failure.device + ": flush failed: " +
                             std::system_category().message(failure.error));
    }
    if (released) return pass_handover();
    release_locks();
}

// The new process takes the devices' locks before it serves: one writer at
// a time. Off the loops too: rbd_lock_release waits for the cluster as a
// flush does (a cluster lost right after the flushes came back).
void Server::release_locks() {
    auto errors = std::make_shared<std::map<std::string, std::string>>();
    for (const auto& d : devices_) (*errors)[d->name()];
    release_errors_ = errors;
    const auto round = ++handover_round_;
    handover_releasing_ = true;
    locks_released_ = true;
    handover_flush_ = flushes_.start_each(
        devices_,
        [errors](Device& d) {
            auto& why = errors->at(d.name());   // the map's shape never changes: each thread writes its own value
            why = d.backend().release_exclusive();
            return why.empty() ? 0 : EIO;
        },
        [this, round] {
            boost::asio::post(io_, [this, round] { exclusive([this, round] { handover_flushed(round); }); });
        });
    wait_handover_round(round, "lock release");
}

void Server::pass_handover() {
    HandoverState state;
    std::vector<int> fds;
    // Activated listeners are systemd's already: the next process gets them again.
    const bool pass_listeners = !to_store_ || options_.activated_fds.empty();
    for (auto& l : listeners_) {
        if (!pass_listeners) break;
        state.listeners.push_back({static_cast<int>(fds.size()), l->tls_mode()});
        fds.push_back(l->native_handle());
    }
    for (auto& [id, c] : connections_) {
        if (!c->parked()) continue;   // in the handshake: stays (finish_handover)
        auto cs = c->handover_state();
        cs.group = groups_.name_of(c->group());
        cs.fd = static_cast<int>(fds.size());
        fds.push_back(c->native_handle());
        state.connections.push_back(std::move(cs));
    }
    state.live_changes = control::live_changes(state_);
    handover_sent_ = true;
    handover_timer_.cancel();
    spdlog::info("hand-over: passing {} listener(s) and {} connection(s)", state.listeners.size(),
                 state.connections.size());
    if (!to_store_) return handover_->send_state(to_json(state), fds);
    std::string error;
    if (!options_.store_handover(to_json(state), fds, error)) return abort_handover(error);
    finish_handover();
}

// SIGTERM under systemd with --fdstore-handover: hand everything to the
// next start through the fd store; when that is refused or fails, the
// ordinary shutdown.
void Server::stop_by_handover() {
    const auto why = begin_handover(HandoverTo::fd_store, false);
    if (!why.empty()) {
        spdlog::warn("SIGTERM: no hand-over through the fd store: {}", why);
        return begin_shutdown("SIGTERM");
    }
    to_store_ = true;
    if (options_.on_stopping) options_.on_stopping();
}

// This side gave up: the new process (if one asked) hears why, then serve on.
void Server::fail_handover(const std::string& why) {
    if (handover_ && !to_store_) handover_->fail(why);
    abort_handover(why);
}

void Server::abort_handover(const std::string& why) {
    if (!handing_over_) return;
    handing_over_ = false;
    handover_sent_ = false;
    // A device whose lock release still runs cannot take it back now (its
    // writes fail, EROFS, until that release ends); the others do.
    std::vector<std::string> releasing;
    if (std::exchange(handover_releasing_, false) && handover_flush_)
        releasing = flushes_.outcome(handover_flush_).unfinished;
    if (!releasing.empty()) {   // handover_flushed takes them back once it ends
        abandoned_release_ = handover_round_;
        abandoned_devices_ = releasing;
    }
    handover_flush_.reset();   // a flush still running is flushes_'s: a later hand-over waits for it
    handover_timer_.cancel();
    if (stopping_ || to_store_)   // this process stops all the same (its SIGTERM)
        spdlog::warn("hand-over abandoned: {}", why);
    else
        spdlog::warn("hand-over failed: {}; serving on", why);
    for (const auto& name : releasing)
        spdlog::warn("device {}: its lock release still waits for the storage: taken back once it ends (writes fail "
                     "until then)",
                     name);
    if (std::exchange(locks_released_, false)) {
        std::vector<std::string> names;
        for (const auto& d : devices_)
            if (!listed(releasing, d->name())) names.push_back(d->name());
        take_back_locks(names);
    }
    retake_later();   // the locks lost before it (those being taken back now are left to that try)
    for (auto& l : listeners_) l->resume_accepting();
    if (!stopping_ && !to_store_) reopen_endpoints(0);
    if (!taking_back_.empty()) {
        takeback_timer_.expires_after(config_.limits.drain_timeout);
        takeback_timer_.async_wait([this](const boost::system::error_code& ec) {
            if (!ec) exclusive([this] { unpark_held(true); });
        });
    }
    unpark_held(false);
    // The handshakes go on, unless this process stops all the same: its
    // shutdown answers them NBD_REP_ERR_SHUTDOWN.
    if (!stopping_ && !to_store_) {
        auto open = connections_;   // a connection may finish inside release_handshake()
        for (auto& [id, c] : open) c->release_handshake();
    }
    if (std::exchange(to_store_, false)) begin_shutdown("SIGTERM");   // it was asked to stop: the ordinary way
}

// The failed new process may still hold the control socket or metrics
// port for a moment: try again for about 2 s.
void Server::reopen_endpoints(int attempt) {
    std::string error;
    control_.reset();
    metrics_.reset();
    if (open_endpoints(error)) {
        if (control_) control_->start();
        if (metrics_) metrics_->start();
        return;
    }
    control_.reset();
    metrics_.reset();
    if (attempt >= 20) return spdlog::error("after the failed hand-over: {}", error);
    handover_timer_.expires_after(std::chrono::milliseconds(100));
    handover_timer_.async_wait([this, attempt](const boost::system::error_code& ec) {
        if (!ec && !handing_over_ && !stopping_) reopen_endpoints(attempt + 1);
    });
}

// Every device, even after one failed; false and the errors when any failed.
bool Server::acquire_exclusive(std::string& error) {
    std::string errors;
    for (auto& d : devices_) {
        std::string broke;   // only after our own release
        if (auto why = d->backend().acquire_exclusive(broke); !why.empty())
            errors += (errors.empty() ? "" : "; ") + ("device " + d->name() + ": " + why);
    }
    if (!errors.empty()) error = errors;
    return errors.empty();
}

// flushes_.running() lists devices; what runs on them is one of these.
std::string Server::left_behind(const std::string& device) const {
    if (listed(taking_back_, device)) return "the take-back of the lock";
    if (listed(abandoned_devices_, device)) return "the lock release";
    return "the flush";
}

void Server::finish_handover() {
    spdlog::info("hand-over: the new process took over {} connection(s); exiting", connections_.size());
    handing_over_ = false;
    stopped_ = true;
    // The sockets are the new process's now: close our descriptors only
    // (no shutdown, no unlink of the socket files).
    for (auto& l : listeners_) l->release();
    if (handover_) handover_->close(true);
    boost::system::error_code ignored;
    signals_.cancel(ignored);
    // The handshakes held meanwhile: their next option is answered
    // NBD_REP_ERR_SHUTDOWN (the client connects again, to the new process);
    // the exit waits for that, a client that sends none for at most
    // shutdown_option_wait (connection.cpp), bounded here too.
    leaving_ = true;
    auto open = connections_;   // a connection may finish inside shutdown()
    for (auto& [id, c] : open)
        if (c->in_handshake()) c->shutdown();
    if (!handshakes_left()) return io_.stop();
    handover_timer_.expires_after(handshake_goodbye);
    handover_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec) io_.stop();
    });
}

bool Server::handshakes_left() const {
    return std::any_of(connections_.begin(), connections_.end(), [](const auto& e) { return e.second->in_handshake(); });
}

}   // namespace nbdsched::daemon
