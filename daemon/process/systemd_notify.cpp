#include "daemon/process/systemd_notify.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <systemd/sd-daemon.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>

namespace nbdsched::daemon {

namespace {

// sd_notify() takes a C string; a status must stay one line, since the
// protocol is newline-separated assignments.
std::string one_line(std::string_view text) {
    std::string out(text);
    for (char& c : out)
        if (c == '\n' || c == '\r') c = ' ';
    return out;
}

void send(const std::string& message) {
    // unset_environment = 0: a reload re-notifies on the same socket.
    sd_notify(0, message.c_str());
}

std::string unix_address(const sockaddr_un& sun, socklen_t len) {
    const std::size_t offset = offsetof(sockaddr_un, sun_path);
    if (len <= offset) return "(unnamed)";
    std::size_t n = len - offset;
    if (sun.sun_path[0] == '\0') return "@" + std::string(sun.sun_path + 1, n - 1);
    return std::string(sun.sun_path, strnlen(sun.sun_path, n));
}

std::string inet_address(const sockaddr_storage& ss) {
    char host[INET6_ADDRSTRLEN] = {};
    if (ss.ss_family == AF_INET) {
        const auto& sin = reinterpret_cast<const sockaddr_in&>(ss);
        inet_ntop(AF_INET, &sin.sin_addr, host, sizeof host);
        return std::string(host) + ":" + std::to_string(ntohs(sin.sin_port));
    }
    const auto& sin6 = reinterpret_cast<const sockaddr_in6&>(ss);
    inet_ntop(AF_INET6, &sin6.sin6_addr, host, sizeof host);
    return "[" + std::string(host) + "]:" + std::to_string(ntohs(sin6.sin6_port));
}

InheritedSocket inspect(int fd, std::string name) {
    InheritedSocket s;
    s.fd = fd;
    s.name = std::move(name);
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return s;
    s.family = ss.ss_family;
    // listening = 1: an accepted connection (Accept=yes) is not for us
    const bool listening_stream = sd_is_socket(fd, s.family, SOCK_STREAM, 1) > 0;
    if (s.family == AF_UNIX) {
        s.address = unix_address(reinterpret_cast<const sockaddr_un&>(ss), len);
        if (listening_stream) s.kind = InheritedSocket::Kind::unix_socket;
    } else if (s.family == AF_INET || s.family == AF_INET6) {
        s.address = inet_address(ss);
        if (listening_stream) s.kind = InheritedSocket::Kind::tcp;
    }
    return s;
}

}   // namespace

void notify_ready(std::string_view status) {
    send("READY=1\nSTATUS=" + one_line(status));
}

void notify_status(std::string_view status) {
    send("STATUS=" + one_line(status));
}

void notify_reloading() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    const auto usec = static_cast<unsigned long long>(ts.tv_sec) * 1000000ull +
                      static_cast<unsigned long long>(ts.tv_nsec) / 1000ull;
    send("RELOADING=1\nSTATUS=reloading the configuration\nMONOTONIC_USEC=" + std::to_string(usec));
}

void notify_start_wait(std::chrono::microseconds more, std::string_view status) {
    send("EXTEND_TIMEOUT_USEC=" + std::to_string(more.count()) + "\nSTATUS=" + one_line(status));
}

void notify_stopping() {
    send("STOPPING=1\nSTATUS=stopping");
}

std::vector<InheritedSocket> inherited_sockets() {
    char** names = nullptr;
    const int n = sd_listen_fds_with_names(1, &names);
    std::vector<InheritedSocket> out;
    for (int i = 0; i < n; ++i) {
        const int fd = SD_LISTEN_FDS_START + i;
        // sd_listen_fds leaves FD_CLOEXEC set on the fds it returns; make
        // sure, since a backend helper must never inherit a listener.
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        out.push_back(inspect(fd, names && names[i] ? names[i] : ""));
    }
    if (names) {
        for (int i = 0; names[i]; ++i) std::free(names[i]);
        std::free(names);
    }
    return out;
}

std::string describe(const InheritedSocket& socket) {
    switch (socket.kind) {
    case InheritedSocket::Kind::unix_socket: return "unix " + socket.address;
    case InheritedSocket::Kind::tcp: return "tcp " + socket.address;
    case InheritedSocket::Kind::other: break;
    }
    return "fd " + std::to_string(socket.fd) + " (not a listening stream socket)";
}

}   // namespace nbdsched::daemon
