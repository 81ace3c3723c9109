// The daemon as a process under test, started from a configuration text the
// test writes itself (the integration harness only knows plain RAM/file
// devices; these tests need schedulers, profiles, limits) and killed with
// any signal, SIGKILL included. Reuses the integration harness's TempDir
// and socket helpers.
#pragma once

#include <string>
#include <sys/types.h>

#include "harness.hpp"

namespace nbdsched::reliability {

// Resident memory of a process from /proc/PID/status, in KiB; -1 if unknown.
long rss_kib(pid_t pid);        // VmRSS: now
long peak_rss_kib(pid_t pid);   // VmHWM: the high-water mark

class DaemonProc {
public:
    // `body` is the YAML after `listen:` (devices, exports, groups, limits);
    // the daemon listens on a unix socket in a private temporary directory.
    // File devices may put their image in dir().path(). Does not start it.
    explicit DaemonProc(const std::string& body);
    ~DaemonProc();   // SIGKILLs a daemon still running
    DaemonProc(const DaemonProc&) = delete;
    DaemonProc& operator=(const DaemonProc&) = delete;

    // Starts the daemon and waits until its socket accepts connections;
    // throws std::runtime_error (with the log) when it does not.
    void start();
    // Sends `sig` and waits for the exit; returns the exit code, 128+signal
    // when killed by one, -1 on a 60 s timeout (then it is SIGKILLed).
    int stop(int sig);
    bool running();

    pid_t pid() const { return pid_; }
    const std::string& socket_path() const { return socket_; }
    std::string uri(const std::string& export_name = "default") const;
    const itest::TempDir& dir() const { return dir_; }
    std::string log() const;

private:
    itest::TempDir dir_;
    std::string config_;
    std::string log_;
    std::string socket_;
    pid_t pid_ = -1;
};

// NBDSCHED is unset or not executable: the reason to print with SKIP.
std::string skip_reason();

} // namespace nbdsched::reliability
