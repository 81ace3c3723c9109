// A Unix socket file that only its owner can connect to, from the moment it
// exists (the control socket, the hand-over socket: whoever connects there
// can run commands or take every client's socket).
#pragma once

#include <boost/asio/local/stream_protocol.hpp>
#include <string>

namespace nbdsched::daemon {

// Opens `acceptor` and binds it to `path` with mode 0600 (less the umask).
// The mode is set on the socket before bind(), which creates the file with
// it: no window in which others could connect, and no process-wide umask
// change that files other threads create meanwhile would get.
void bind_private(boost::asio::local::stream_protocol::acceptor& acceptor, const std::string& path,
                  boost::system::error_code& ec);

}   // namespace nbdsched::daemon
