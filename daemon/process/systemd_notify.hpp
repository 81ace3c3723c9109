// The daemon's side of the systemd protocols, through libsystemd:
// sd_notify (Type=notify: READY=1, STATUS=, RELOADING=1, STOPPING=1) and
// socket activation (sd_listen_fds_with_names: nbdsched.socket or
// systemd-socket-activate hand over listening sockets, which the daemon
// adopts instead of binding its own).
//
// Outside systemd (no $NOTIFY_SOCKET, no $LISTEN_FDS) every call is a no-op
// and inherited_sockets() is empty, so main can call them unconditionally.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace nbdsched::daemon {

// READY=1 plus STATUS=<status>: call once every listener accepts.
void notify_ready(std::string_view status);
// STATUS=<status>: a one-line summary for `systemctl status`.
void notify_status(std::string_view status);
// RELOADING=1 with MONOTONIC_USEC (required by Type=notify-reload, harmless
// for Type=notify): call on SIGHUP before re-reading the configuration, and
// notify_ready() when done.
void notify_reloading();
// EXTEND_TIMEOUT_USEC=<more> plus STATUS=<status>: the start goes on for
// `more` at least (past TimeoutStartSec= if need be); send again to go on longer.
void notify_start_wait(std::chrono::microseconds more, std::string_view status);
// STOPPING=1: call when the orderly shutdown begins.
void notify_stopping();

struct InheritedSocket {
    enum class Kind { unix_socket,
                      tcp,
                      other };
    int fd = -1;
    Kind kind = Kind::other;   // other: not a listening stream socket; close it
    int family = 0;            // AF_UNIX, AF_INET, AF_INET6
    std::string address;       // "/run/x.sock", "@abstract", "127.0.0.1:10809", "[::1]:10809"
    std::string name;          // FileDescriptorName= (systemd-socket-activate --fdname)
};

// The sockets passed by systemd, in order; empty when not socket-activated.
// Clears $LISTEN_FDS/$LISTEN_PID/$LISTEN_FDNAMES so children do not take
// them; the fds are close-on-exec.
std::vector<InheritedSocket> inherited_sockets();

// "unix /run/x.sock", "tcp 127.0.0.1:10809" (for log lines).
std::string describe(const InheritedSocket& socket);

}   // namespace nbdsched::daemon
