#include "daemon/process/handover_wire.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon/session/connection.hpp"

namespace nbdsched::daemon {

namespace {

constexpr std::size_t fds_per_batch = 250;   // SCM_MAX_FD is 253 (include/net/scm.h)
// A command word, or the state's fields besides `unread`: per connection
// (peer, identity, export and group names) and for the whole.
constexpr std::size_t text_base = 1u << 20;
constexpr std::size_t text_per_fd = 16u << 10;

std::string sys_error(const char* what) {
    return std::string(what) + ": " + (errno == EAGAIN ? "timed out" : std::strerror(errno));
}

bool write_all(int sock, const void* data, std::size_t n, std::string& error) {
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        ssize_t w = ::send(sock, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) {
            error = sys_error("hand-over send");
            return false;
        }
        p += w;
        n -= static_cast<std::size_t>(w);
    }
    return true;
}

bool read_all(int sock, void* data, std::size_t n, std::string& error) {
    auto* p = static_cast<char*>(data);
    while (n > 0) {
        ssize_t r = ::recv(sock, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            error = sys_error("hand-over receive");
            return false;
        }
        if (r == 0) {
            error = "hand-over: the other process closed the connection";
            return false;
        }
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

// A message of the one byte at `iov` with room for `control`: a batch of
// descriptors travels in the control data.
msghdr one_byte_message(iovec& iov, std::vector<char>& control) {
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = control.data();
    m.msg_controllen = control.size();
    return m;
}

bool send_batch(int sock, const int* fds, std::size_t count, std::string& error) {
    char byte = 'F';
    iovec iov{&byte, 1};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * count));
    msghdr m = one_byte_message(iov, control);
    cmsghdr* c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * count);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * count);
    while (::sendmsg(sock, &m, MSG_NOSIGNAL) < 0) {
        if (errno == EINTR) continue;
        error = sys_error("hand-over: passing descriptors");
        return false;
    }
    return true;
}

bool recv_batch(int sock, std::size_t count, std::vector<int>& out, std::string& error) {
    char byte = 0;
    iovec iov{&byte, 1};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds_per_batch));
    msghdr m = one_byte_message(iov, control);
    ssize_t r;
    while ((r = ::recvmsg(sock, &m, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {}
    if (r <= 0) {
        error = r == 0 ? "hand-over: closed while passing descriptors" : sys_error("hand-over: receiving descriptors");
        return false;
    }
    std::size_t got = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            out.push_back(fd);
        }
        got += n;
    }
    if ((m.msg_flags & MSG_CTRUNC) != 0 || got != count) {
        error = "hand-over: expected " + std::to_string(count) + " descriptors, got " + std::to_string(got) +
                ((m.msg_flags & MSG_CTRUNC) != 0 ? " (truncated: out of descriptors?)" : "");
        return false;
    }
    return true;
}

}   // namespace

void close_fds(std::vector<int>& fds) {
    for (int fd : fds) ::close(fd);
    fds.clear();
}

std::size_t max_handover_text(std::size_t fds) {
    return text_base + fds * (2 * Connection::read_buffer_size + text_per_fd);
}

namespace {
std::string over_limit(std::size_t text, std::size_t fds) {
    return "hand-over: a state of " + std::to_string(text) + " bytes with " + std::to_string(fds) +
           " descriptors is over the limit (" + std::to_string(fds > max_handover_fds ? 0 : max_handover_text(fds)) +
           " bytes, " + std::to_string(max_handover_fds) + " descriptors)";
}
}   // namespace

bool send_handover(int sock, const std::string& text, const std::vector<int>& fds, std::string& error) {
    if (fds.size() > max_handover_fds || text.size() > std::min<std::size_t>(max_handover_text(fds.size()), UINT32_MAX)) {
        error = over_limit(text.size(), fds.size());
        return false;
    }
    const std::uint32_t header[2] = {static_cast<std::uint32_t>(text.size()), static_cast<std::uint32_t>(fds.size())};
    if (!write_all(sock, header, sizeof header, error)) return false;
    for (std::size_t at = 0; at < fds.size(); at += fds_per_batch)
        if (!send_batch(sock, fds.data() + at, std::min(fds_per_batch, fds.size() - at), error)) return false;
    return write_all(sock, text.data(), text.size(), error);
}

std::optional<HandoverMessage> recv_handover(int sock, std::string& error) {
    std::uint32_t header[2];
    if (!read_all(sock, header, sizeof header, error)) return std::nullopt;
    if (header[1] > max_handover_fds || header[0] > max_handover_text(header[1])) {
        error = over_limit(header[0], header[1]);
        return std::nullopt;
    }
    HandoverMessage m;
    for (std::size_t at = 0; at < header[1]; at += fds_per_batch) {
        if (!recv_batch(sock, std::min<std::size_t>(fds_per_batch, header[1] - at), m.fds, error)) {
            close_fds(m.fds);
            return std::nullopt;
        }
    }
    m.text.resize(header[0]);
    if (!read_all(sock, m.text.data(), m.text.size(), error)) {
        close_fds(m.fds);
        return std::nullopt;
    }
    return m;
}

}   // namespace nbdsched::daemon
