// What may stand at a path a Unix socket is to be bound to. Shared by the
// listeners, the control socket and the hand-over socket, so that none of
// them binds over (or, after a failed bind, removes) a file that is not
// a socket.
#pragma once

#include <string>

namespace nbdsched::daemon {

// "" when nothing is at `path` or a socket is (stale or not: the caller
// probes it); else why a socket cannot go there, e.g. "exists and is not a
// socket (a regular file)". A symbolic link counts as not a socket: bind()
// would not follow it.
std::string not_a_socket(const std::string& path);

}   // namespace nbdsched::daemon
