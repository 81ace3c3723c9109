#include "kernel/connect.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

#include "nbd/negotiation.hpp"
#include "nbd/wire.hpp"

namespace nbdsched::kernel {

namespace {

using Clock = std::chrono::steady_clock;

std::string errno_text() { return std::strerror(errno); }

// Waits until `fd` is ready for `events` or the deadline passes.
bool wait_for(int fd, short events, Clock::time_point deadline) {
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
        if (left <= 0) {
            errno = ETIMEDOUT;
            return false;
        }
        pollfd p{fd, events, 0};
        int n = ::poll(&p, 1, static_cast<int>(left));
        if (n > 0) return true;
        if (n < 0 && errno != EINTR) return false;
    }
}

bool write_all(int fd, const std::uint8_t* data, std::size_t size, Clock::time_point deadline) {
    while (size > 0) {
        if (!wait_for(fd, POLLOUT, deadline)) return false;
        ssize_t n = ::send(fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n < 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

bool read_all(int fd, std::uint8_t* data, std::size_t size, Clock::time_point deadline) {
    while (size > 0) {
        if (!wait_for(fd, POLLIN, deadline)) return false;
        ssize_t n = ::recv(fd, data, size, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (n == 0) errno = ECONNRESET;
        if (n <= 0) return false;
        data += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

// A connected, blocking-mode socket (the kernel wants a blocking one).
Fd open_socket(const Target& t, Clock::time_point deadline, std::string& error) {
    if (!t.unix_path.empty()) {
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        if (t.unix_path.size() >= sizeof(addr.sun_path)) {
            error = "unix socket path too long: " + t.unix_path;
            return {};
        }
        std::memcpy(addr.sun_path, t.unix_path.c_str(), t.unix_path.size() + 1);
        Fd fd(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
        if (fd.get() < 0 || ::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
            error = "connect " + t.unix_path + ": " + errno_text();
            return {};
        }
        return fd;
    }
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    auto port = std::to_string(t.port);
    if (int rc = ::getaddrinfo(t.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
        error = "resolve " + t.host + ": " + ::gai_strerror(rc);
        return {};
    }
    error = "connect " + t.describe() + ": no address";
    Fd result;
    for (auto* a = found; a && result.get() < 0; a = a->ai_next) {
        Fd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol));
        if (fd.get() < 0) continue;
        int rc = ::connect(fd.get(), a->ai_addr, a->ai_addrlen);
        int soerr = 0;
        socklen_t len = sizeof soerr;
        if (rc != 0 && errno == EINPROGRESS && wait_for(fd.get(), POLLOUT, deadline) &&
            ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &soerr, &len) == 0) {
            errno = soerr;
            rc = soerr == 0 ? 0 : -1;
        }
        if (rc != 0) {
            error = "connect " + t.describe() + ": " + errno_text();
            continue;
        }
        int one = 1;
        ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        ::fcntl(fd.get(), F_SETFL, 0);   // back to blocking
        result = std::move(fd);
    }
    ::freeaddrinfo(found);
    return result;
}

}   // namespace

void set_io_timeouts(int fd, std::chrono::milliseconds timeout) {
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>(timeout.count() % 1000 * 1000);
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

std::string Target::describe() const {
    return unix_path.empty() ? host + ":" + std::to_string(port) : unix_path;
}

Fd& Fd::operator=(Fd&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.release();
    }
    return *this;
}

Fd::~Fd() {
    if (fd_ >= 0) ::close(fd_);
}

std::optional<Connected> connect_export(const Target& target, std::chrono::milliseconds timeout, std::string& error) {
    auto deadline = Clock::now() + timeout;
    Fd fd = open_socket(target, deadline, error);
    if (fd.get() < 0) return std::nullopt;
    auto io_error = [&](const char* what) {
        error = target.describe() + ": " + what + ": " + errno_text();
        return std::nullopt;
    };
    std::array<std::uint8_t, nbd::greeting_size> greeting{};
    if (!read_all(fd.get(), greeting.data(), greeting.size(), deadline)) return io_error("reading the greeting");
    auto flags = nbd::decode_greeting(greeting);
    if (!flags) {
        error = target.describe() + ": not a fixed-newstyle NBD server";
        return std::nullopt;
    }
    auto go = nbd::encode_go(*flags, target.export_name);
    if (!write_all(fd.get(), go.data(), go.size(), deadline)) return io_error("sending NBD_OPT_GO");
    nbd::GoReplies replies;
    for (;;) {
        std::vector<std::uint8_t> header(nbd::option_reply_header_size);
        if (!read_all(fd.get(), header.data(), header.size(), deadline)) return io_error("reading a reply");
        std::uint32_t length = nbd::load_u32(header.data() + 16);
        if (length > nbd::max_option_length) {
            error = target.describe() + ": option reply of " + std::to_string(length) + " bytes";
            return std::nullopt;
        }
        header.resize(header.size() + length);
        if (!read_all(fd.get(), header.data() + nbd::option_reply_header_size, length, deadline))
            return io_error("reading a reply");
        nbd::OptionReply reply;
        if (nbd::decode_option_reply(header, reply).value_or(0) != header.size()) {
            error = target.describe() + ": bad option reply magic";
            return std::nullopt;
        }
        auto state = replies.feed(reply);
        if (state == nbd::GoReplies::State::failed) {
            error = "export '" + target.export_name + "' at " + target.describe() + ": " + replies.error();
            return std::nullopt;
        }
        if (state == nbd::GoReplies::State::done) break;
    }
    return Connected{std::move(fd), replies.result()};
}

}   // namespace nbdsched::kernel
