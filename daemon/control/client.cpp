#include "daemon/control/client.hpp"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace nbdsched::daemon::control {

namespace {

class Fd {
public:
    explicit Fd(int fd) : fd_(fd) {}
    ~Fd() {
        if (fd_ >= 0) ::close(fd_);
    }
    Fd(const Fd&) = delete;
    Fd& operator=(const Fd&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

bool wait_for(int fd, short events, int timeout_seconds) {
    pollfd p{fd, events, 0};
    int rc;
    do rc = ::poll(&p, 1, timeout_seconds * 1000);
    while (rc < 0 && errno == EINTR);
    return rc > 0;
}

}   // namespace

std::optional<std::string> request(const std::string& socket_path, const std::string& line, std::string& error,
                                   int timeout_seconds, bool* connected) {
    if (connected) *connected = false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof addr.sun_path) {
        error = socket_path + ": path too long";
        return std::nullopt;
    }
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (fd.get() < 0 || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        error = socket_path + ": " + std::strerror(errno);
        return std::nullopt;
    }
    if (connected) *connected = true;
    std::string out = line + "\n";
    for (std::size_t done = 0; done < out.size();) {
        auto n = ::send(fd.get(), out.data() + done, out.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error = socket_path + ": send: " + std::strerror(errno);
            return std::nullopt;
        }
        done += static_cast<std::size_t>(n);
    }
    std::string reply;
    char buf[65536];
    while (reply.empty() || reply.back() != '\n') {
        if (!wait_for(fd.get(), POLLIN, timeout_seconds)) {
            error = socket_path + ": the daemon did not answer within " + std::to_string(timeout_seconds) + " s";
            return std::nullopt;
        }
        auto n = ::recv(fd.get(), buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            error = socket_path + ": the daemon closed the connection";
            return std::nullopt;
        }
        reply.append(buf, static_cast<std::size_t>(n));
    }
    reply.pop_back();
    return reply;
}

}   // namespace nbdsched::daemon::control
