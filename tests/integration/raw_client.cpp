#include "raw_client.hpp"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

#include "harness.hpp"

namespace nbdsched::itest {

namespace {
// Only for hangs (a healthy daemon answers in microseconds).
constexpr int k_timeout_ms = 30000;
} // namespace

void put_be(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
    for (int i = bytes - 1; i >= 0; --i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint64_t get_be(const std::uint8_t* p, int bytes) {
    std::uint64_t v = 0;
    for (int i = 0; i < bytes; ++i) v = (v << 8) | p[i];
    return v;
}

RawConn::RawConn(const std::string& unix_socket) : fd_(connect_unix(unix_socket)) {
    if (fd_ < 0) throw std::runtime_error("cannot connect to " + unix_socket);
}

RawConn::~RawConn() { close_now(); }

void RawConn::close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

void RawConn::send(const std::vector<std::uint8_t>& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
}

std::vector<std::uint8_t> RawConn::recv(std::size_t n) {
    std::vector<std::uint8_t> out(n);
    std::size_t done = 0;
    while (done < n) {
        pollfd p{fd_, POLLIN, 0};
        int r = poll(&p, 1, k_timeout_ms);
        if (r == 0) throw std::runtime_error("recv: no data for 30 s");
        if (r < 0 && errno == EINTR) continue;
        ssize_t got = ::recv(fd_, out.data() + done, n - done, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got == 0) throw std::runtime_error("recv: connection closed");
        if (got < 0) throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
        done += static_cast<std::size_t>(got);
    }
    return out;
}

bool RawConn::wait_closed() {
    char buf[4096];
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        int r = poll(&p, 1, k_timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return true;   // EOF or reset
    }
}

std::uint16_t RawConn::greet() {
    auto g = recv(18);
    if (std::memcmp(g.data(), "NBDMAGIC", 8) != 0 || get_be(g.data() + 8, 8) != nbd::k_opt_magic)
        throw std::runtime_error("bad greeting");
    auto flags = static_cast<std::uint16_t>(get_be(g.data() + 16, 2));
    no_zeroes_ = (flags & 2) != 0;
    std::vector<std::uint8_t> reply;
    put_be(reply, 1u | (no_zeroes_ ? 2u : 0u), 4);   // FIXED_NEWSTYLE [| NO_ZEROES]
    send(reply);
    return flags;
}

std::uint64_t RawConn::open_export(const std::string& name) {
    greet();
    std::vector<std::uint8_t> opt;
    put_be(opt, nbd::k_opt_magic, 8);
    put_be(opt, nbd::k_opt_export_name, 4);
    put_be(opt, name.size(), 4);
    opt.insert(opt.end(), name.begin(), name.end());
    send(opt);
    auto info = recv(10 + (no_zeroes_ ? 0 : 124));
    return get_be(info.data(), 8);
}

std::vector<std::uint8_t> RawConn::request(std::uint16_t type, std::uint64_t handle,
                                           std::uint64_t offset, std::uint32_t length,
                                           std::uint16_t flags, std::uint32_t magic) {
    std::vector<std::uint8_t> r;
    put_be(r, magic, 4);
    put_be(r, flags, 2);
    put_be(r, type, 2);
    put_be(r, handle, 8);
    put_be(r, offset, 8);
    put_be(r, length, 4);
    return r;
}

std::uint32_t RawConn::recv_simple_reply(std::uint64_t handle) {
    auto r = recv(16);
    if (get_be(r.data(), 4) != nbd::k_simple_reply_magic)
        throw std::runtime_error("not a simple reply");
    if (get_be(r.data() + 8, 8) != handle) throw std::runtime_error("reply to another handle");
    return static_cast<std::uint32_t>(get_be(r.data() + 4, 4));
}

} // namespace nbdsched::itest
