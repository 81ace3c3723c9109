// Opens a connection to an NBD server and negotiates an export with
// NBD_OPT_GO, leaving the socket in transmission mode for the kernel.
// Blocking, with a deadline: it runs in `nbdsched attach`, not in the daemon.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>

#include "nbd/client_go.hpp"

namespace nbdsched::kernel {

// Where the server is: a unix socket path, or a TCP host and port.
struct Target {
    std::string unix_path;
    std::string host;
    std::uint16_t port = 0;
    std::string export_name;

    std::string describe() const;
};

// An owned socket file descriptor.
class Fd {
public:
    Fd() = default;
    explicit Fd(int fd) : fd_(fd) {}
    Fd(Fd&& o) noexcept : fd_(o.release()) {}
    Fd& operator=(Fd&& o) noexcept;
    ~Fd();
    int get() const { return fd_; }
    int release() {
        int fd = fd_;
        fd_ = -1;
        return fd;
    }

private:
    int fd_ = -1;
};

// Blocking sends and receives on `fd` fail with EAGAIN after `timeout`
// without progress (SO_SNDTIMEO, SO_RCVTIMEO): a peer that stops answering
// fails the call instead of hanging it.
void set_io_timeouts(int fd, std::chrono::milliseconds timeout);

struct Connected {
    Fd socket;
    nbd::GoResult info;
};

// nullopt with `error` ("connect /run/x.sock: No such file or directory",
// "export 'x': NBD_REP_ERR_UNKNOWN: ...") when the server cannot be reached
// or refuses; the whole handshake must finish within `timeout`.
std::optional<Connected> connect_export(const Target& target, std::chrono::milliseconds timeout, std::string& error);

}   // namespace nbdsched::kernel
