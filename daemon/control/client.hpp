// `nbdsched ctl`: the client side of the control socket.
#pragma once

#include <optional>
#include <string>

namespace nbdsched::daemon::control {

// Sends one request line and reads one reply line. nullopt and `error` when
// the socket cannot be reached or the daemon hangs up (timeout in seconds);
// `connected` (if given) says whether the daemon was reached, so the
// request may have been read and acted on.
std::optional<std::string> request(const std::string& socket_path, const std::string& line, std::string& error,
                                   int timeout_seconds = 10, bool* connected = nullptr);

// `nbdsched ctl ...`: argv[0] is "ctl". Returns the process exit code:
// 0 done, 1 the daemon refused (message on stderr), 2 usage or connection.
int run_ctl(int argc, char** argv);

}   // namespace nbdsched::daemon::control
