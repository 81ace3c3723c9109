// The whole daemon minus main(): devices, exports, listeners, connections,
// signals and the orderly shutdown. Loop 0 (the thread in run()) runs the
// listeners, handshakes, control, metrics, reload and signals; each device
// and the transmission phase of its connections run on one of
// limits.threads event loops (event_loops.hpp, docs/threads.md); a thread
// pool runs blocking backends.
//
// Shutdown (SIGTERM/SIGINT or stop()): stop accepting, let every connection
// answer what it has read (bounded by limits.drain_timeout), flush every device
// (bounded by drain_timeout too: storage_waits.hpp), wait for what is left
// on the I/O thread pool (a reload's size read, a forced shutdown's
// requests; bounded the same way), return 0 from run(). SIGHUP reloads the
// config file (reload.hpp).
//
// Planned restart (server_handover.cpp, docs/restart.md): with a hand-over
// socket, a new process can ask for the listeners and live connections;
// this one parks them at request boundaries, passes them, and exits.
// After one that failed, it takes its locks back, and tries again those
// it could not get (server_takeback.cpp).
//
// Scheduling: connections are classified at accept
// (placement.hpp), a control socket and a Prometheus endpoint run when the
// config asks for them.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backend/spec.hpp"
#include "common/rate_limit.hpp"
#include "config/config.hpp"
#include "daemon/tenancy/classify.hpp"
#include "daemon/session/connection.hpp"
#include "daemon/control/server.hpp"
#include "daemon/control/state.hpp"
#include "daemon/device/device.hpp"
#include "daemon/tenancy/exports.hpp"
#include "daemon/tenancy/groups.hpp"
#include "daemon/session/listener.hpp"
#include "daemon/metrics/endpoint.hpp"
#include "daemon/process/event_loops.hpp"
#include "daemon/process/handover_server.hpp"
#include "daemon/process/lost_locks.hpp"
#include "daemon/process/reload.hpp"
#include "daemon/process/storage_waits.hpp"
#include "daemon/process/takeover.hpp"

namespace nbdsched::daemon {

struct ServerOptions {
    bool handle_signals = true;
    std::vector<int> activated_fds;      // systemd socket activation: listen on these instead
    std::function<void()> on_ready;      // after listening (sd_notify READY=1)
    std::function<void()> on_stopping;   // shutdown begins (sd_notify STOPPING=1)
    // Start-up waits for something outside the daemon (an image's lock):
    // at least `more` from now, `status` says what (sd_notify
    // EXTEND_TIMEOUT_USEC, so that systemd's start timeout does not end it).
    std::function<void(std::chrono::seconds more, const std::string& status)> on_start_wait;
    ConfigAdjust reload_adjust;                // SIGHUP: applied to the re-read config
    std::string handover_path;                 // serve planned-restart hand-overs on this unix socket
    const HandedOver* handed_over = nullptr;   // a hand-over: listen and serve on these instead
    bool takeover_pending = false;             // --takeover: no sockets until take_over()
    // --fdstore-handover: SIGTERM passes everything through this (systemd's
    // fd store) and exits, instead of closing the connections.
    std::function<bool(const std::string& json, const std::vector<int>& fds, std::string& error)> store_handover;
};

class Server {
public:
    // Builds everything and binds the listeners; nullptr and `error` when
    // anything fails (nothing listens then).
    static std::unique_ptr<Server> create(const config::Config& config, ServerOptions options, std::string& error);
    ~Server();

    // --takeover (takeover_pending): the listeners and connections the old
    // process passed, plus the control socket and metrics; false and `error`
    // when any of them fails (the old process then serves on).
    bool take_over(const HandedOver& handed, std::string& error);
    // The start failed after create() (no old daemon to take over from, or
    // it refused): what opening the devices changed in their storage goes
    // back (a file grown or created for this start). create() does it on
    // its own failures.
    void undo_start();
    // Runs the event loop on the calling thread until shut down; the exit code.
    int run();
    // After run(): a device's storage did not answer (the final flush, a
    // size read or request still on the I/O pool, a hand-over's flush left
    // behind), so destroying this server (closing that storage) would wait
    // for it too.
    bool storage_stuck() const { return storage_stuck_; }
    // Begins the graceful shutdown; callable from any thread.
    void stop();

    const std::vector<std::unique_ptr<Listener>>& listeners() const { return listeners_; }
    const ExportTable& exports() const { return exports_; }
    boost::asio::io_context& io() { return io_; }
    std::size_t loop_count() const { return loops_.size(); }
    // What the control socket and reload act on (loop 0's thread only, inside exclusive()).
    control::DaemonState& state() { return state_; }
    // Runs `f` on loop 0's thread with every other loop paused: where it may touch any device.
    void exclusive(const std::function<void()>& f) { loops_.exclusive(f); }
    // Re-reads the config file as SIGHUP does: whether it applied, what changed or why not.
    control::ReloadResult reload();

private:
    Server(const config::Config& config, ServerOptions options);
    void accept(Socket socket, std::string peer, nbd::TlsMode tls_mode);
    void wait_signal();
    void begin_shutdown(const std::string& why);
    void check_drained();
    void connection_finished(std::uint64_t id);
    void finish_shutdown();
    void wait_for_storage();   // end of run(): the pool and flushes left behind, bounded
    sched::QueueId open_queue(std::uint64_t connection, const PeerInfo& peer, const std::string& export_name,
                              const ExportBinding& binding, std::optional<sched::GroupId> keep_group);
    // What counts under limits.max_connections: connections_ but those closed in the handshake.
    std::size_t held_connections() const;
    // limits.max_handshakes: closes one connection still in the handshake when that many are.
    void make_handshake_room(const PeerInfo& newcomer, const std::string& peer);
    bool open_sockets(std::string& error);
    // A device's wait for its image's lock (backend::LockWait), on the
    // waiting thread: the open, a take-back, a --takeover's acquire.
    void lock_waited(const std::string& device, const backend::LockWait& wait);
    bool open_endpoints(std::string& error);   // control socket, metrics

    // server_handover.cpp
    bool adopt_listeners(std::string& error);
    bool requires_tls_now(int fd) const;
    void adopt_connections();
    void open_handover();
    // The refusal, or "" once parking has begun. force: RAM devices too
    // (--takeover --force; the fd store has no such switch).
    enum class HandoverTo {
        takeover,   // --takeover PATH: --force hands RAM devices over empty
        fd_store,   // SIGTERM under systemd with --fdstore-handover
    };
    std::string begin_handover(HandoverTo to, bool force);
    void stop_by_handover();
    void check_handover();
    void wait_handover_round(std::uint64_t round, const std::string& what);   // bounded by drain_timeout
    void handover_flushed(std::uint64_t round);
    void release_locks();
    void pass_handover();
    void fail_handover(const std::string& why);   // tells the new process, then abort_handover
    void abort_handover(const std::string& why);
    void reopen_endpoints(int attempt);
    void finish_handover();
    bool handshakes_left() const;
    // After the hand-over, how long the exit waits at most for the clients
    // held in the handshake to be answered (each gets shutdown_option_wait).
    static constexpr auto handshake_goodbye = std::chrono::seconds(2);
    struct TakeBack {
        std::string error;   // acquire_exclusive's answer
        std::string broke;   // the lock holder it broke: the failed new process
    };
    // e.g. RBD images' locks (backend.hpp): the new process, before it serves.
    bool acquire_exclusive(std::string& error);
    // server_takeback.cpp. The old process after a failed hand-over: the
    // locks of `names` taken back off the loops (rbd_lock_acquire waits for
    // the cluster as a release does), the outcome logged on loop 0 by
    // locks_taken_back; `retry`: a try for devices whose lock is lost.
    void take_back_locks(const std::vector<std::string>& names, bool retry = false);
    void locks_taken_back(const std::vector<std::string>& names, const std::map<std::string, TakeBack>& outcome,
                          bool retry);
    // Lost locks (lost_locks_) are tried again after a backoff of each
    // device's own, but not during a hand-over (pause_retakes) nor the
    // shutdown.
    void retake_later();
    void pause_retakes();
    // Each device's flush for a hand-over or the shutdown: none where the lock is lost.
    std::function<int(Device&)> flush_job() const;
    // After a failed hand-over, a connection to a device whose lock is being
    // taken back stays parked until it is back (its writes would fail), or
    // drain_timeout passed (`timed_out`); the others serve on at once.
    void unpark_held(bool timed_out);
    // Whether `name` is one of `names` (devices: taking_back_, ...).
    static bool listed(const std::vector<std::string>& names, const std::string& name);
    // What of a failed hand-over a thread of flushes_ still runs on `device`.
    std::string left_behind(const std::string& device) const;

    config::Config config_;
    ServerOptions options_;
    // Declared first so it is destroyed last: handlers still queued in it at
    // the end hold connections, whose destructors touch nothing else.
    boost::asio::io_context io_;
    EventLoops loops_;   // loop 0 is io_; the others' io_contexts outlive the devices on them
    boost::asio::thread_pool pool_;
    // After io_: destroyed first, so a flush finishing later never posts to a gone io_.
    FlushThreads flushes_;
    boost::asio::signal_set signals_;
    boost::asio::steady_timer drain_timer_;
    std::vector<std::unique_ptr<Device>> devices_;
    ExportTable exports_;
    ConnectionContext context_;
    std::unique_ptr<TlsContext> tls_;
    std::vector<std::unique_ptr<Listener>> listeners_;
    // What adopt_listeners leaves until the hand-over is confirmed (a failed
    // one must leave the old process's socket files as they were).
    std::vector<std::function<void()>> once_handed_over_;
    std::map<std::uint64_t, std::shared_ptr<Connection>> connections_;
    GroupTable groups_;
    control::DaemonState state_;
    SizeRefresh sizes_{io_, pool_, state_};   // after a reload, off the loops
    std::unique_ptr<control::ControlServer> control_;
    std::unique_ptr<metrics::Endpoint> metrics_;
    std::unique_ptr<HandoverServer> handover_;
    boost::asio::steady_timer handover_timer_;              // parking, then the flush, each within drain_timeout
    std::shared_ptr<FlushThreads::Round> handover_flush_;   // the hand-over's flush, then its lock release, while it runs
    bool handover_releasing_ = false;                       // handover_flush_ is the release of the locks
    std::uint64_t abandoned_release_ = 0;                   // a failed hand-over's release round still running
    std::vector<std::string> abandoned_devices_;            // ... its devices not released yet: taken back after it
    bool locks_released_ = false;                           // this hand-over has begun releasing the locks
    std::vector<std::string> taking_back_;                  // devices whose lock is being taken back (threads)
    boost::asio::steady_timer takeback_timer_;              // how long their connections stay parked
    boost::asio::steady_timer retake_timer_;                // until the first device in lost_locks_ is due
    // A cluster that answers again is noticed within a second or so; one
    // that stays away costs a try (and a log line, rate-limited) every half
    // minute: per device, a newly lost one starts at 1 s.
    static constexpr std::chrono::milliseconds k_retake_first{1000};
    static constexpr std::chrono::milliseconds k_retake_longest{30000};
    // Each device whose take-back failed: its writes fail (EROFS) until a
    // retry gets the lock back (`ctl stats`: lock_lost).
    LostLocks lost_locks_{k_retake_first, k_retake_longest};
    RateLimit retake_log_{std::chrono::minutes(5), 5};   // failed retries logged
    // Each device's release_exclusive() answer (pre-filled: a thread writes only its own entry).
    std::shared_ptr<std::map<std::string, std::string>> release_errors_;
    std::uint64_t handover_round_ = 0;   // which flush an answer belongs to
    bool handing_over_ = false;
    bool handover_sent_ = false;
    bool to_store_ = false;   // this hand-over goes to the fd store (SIGTERM), not a --takeover process
    bool leaving_ = false;    // handed over: exiting once the handshakes held meanwhile are answered
    std::uint64_t next_id_ = 1;
    bool stopping_ = false;
    bool stopped_ = false;
    std::atomic<bool> ready_ = false;   // serving: a wait is no longer the start's (lock_waited)
    int exit_code_ = 0;
    bool storage_stuck_ = false;
};

}   // namespace nbdsched::daemon
