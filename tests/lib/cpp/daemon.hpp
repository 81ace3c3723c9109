// The real daemon as a process under test: writes its configuration into a
// private temporary directory, runs the executable in the foreground with
// stderr captured to a file, waits until its sockets accept connections, and
// stops it with any signal (SIGKILL included). A failed test case prints the
// daemon's log. The executable comes from the environment (set by meson):
//   NBDSCHED=<path>          the nbdsched executable (the normal case)
//   NBDSCHED_ITEST_NBDKIT=1  develop the tests against nbdkit instead
#pragma once

#include <csignal>
#include <cstdint>
#include <string>
#include <sys/types.h>
#include <vector>

#include "server_spec.hpp"
#include "temp_dir.hpp"

namespace nbdsched::testlib {

// Which server runs the tests; empty reason = available.
struct ServerChoice {
    bool nbdkit = false;
    std::string exe;
    std::string skip_reason;
};
ServerChoice server_choice();
// True when the tests run on the nbdkit stand-in (development only).
bool nbdkit_mode();

class Daemon {
public:
    enum class Start { now,
                       later };
    // Start::now starts the server and waits until it accepts connections;
    // throws std::runtime_error (with the daemon's log) when it does not.
    // Start::later only writes the configuration (the test may first put
    // files into dir()).
    explicit Daemon(ServerSpec spec, Start when = Start::now);
    // Stops it if still running (SIGTERM, SIGKILL after a timeout), without
    // throwing; the log is printed if the current test case fails.
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // Starts it (again) with the same config, sockets and files.
    void start();
    // Sends `signal` and waits (generous timeout for hangs); returns the exit
    // status: 0..255 for exit codes, 128+sig when killed, -1 on a timeout
    // (then it is SIGKILLed).
    int stop(int signal = SIGTERM);
    void restart();
    bool running();
    // The daemon's process id (the first one in nbdkit mode); -1 if stopped.
    pid_t pid() const { return pids_.empty() ? -1 : pids_.front(); }

    const std::string& socket_path(const std::string& export_name = "default") const;
    std::uint16_t tcp_port() const { return port_; }
    std::string uri(const std::string& export_name = "default") const;
    std::string tcp_uri(const std::string& export_name = "default") const;
    std::string log() const;
    const std::string& config_path() const { return config_path_; }
    const TempDir& dir() const { return dir_; }
    // Path of a device's backing file (file backend).
    std::string device_path(const std::string& device) const;

private:
    void write_config() const;
    void start_nbdkit();
    void wait_ready();

    ServerChoice choice_;
    ServerSpec spec_;
    TempDir dir_;
    std::string config_path_;
    std::string log_path_;
    std::string socket_;
    std::uint16_t port_ = 0;
    std::vector<pid_t> pids_;                   // nbdkit: one per export
    std::vector<std::string> export_sockets_;   // nbdkit: parallel to spec_.exports
};

// Resident memory of a process from /proc/PID/status, in KiB; -1 if unknown.
long rss_kib(pid_t pid);        // VmRSS: now
long peak_rss_kib(pid_t pid);   // VmHWM: the high-water mark

}   // namespace nbdsched::testlib
