#include "raw_client.hpp"

#include <cerrno>
#include <cstring>
#include <poll.h>
#include <stdexcept>
#include <sys/socket.h>
#include <unistd.h>

#include "nbd/wire.hpp"
#include "net.hpp"

namespace nbdsched::testlib {

using namespace nbdsched::nbd;

namespace {
// Only for hangs (a healthy server answers in microseconds).
constexpr int k_timeout_ms = 30000;
}   // namespace

RawClient::RawClient(const std::string& unix_socket) : fd_(connect_unix(unix_socket)) {
    if (fd_ < 0) throw std::runtime_error("cannot connect to " + unix_socket);
}

RawClient::~RawClient() { close_now(); }

void RawClient::close_now() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

bool RawClient::readable() {
    for (;;) {
        pollfd p{fd_, POLLIN, 0};
        int r = ::poll(&p, 1, k_timeout_ms);
        if (r < 0 && errno == EINTR) continue;
        return r > 0;
    }
}

void RawClient::send(const std::vector<std::uint8_t>& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
        ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) throw std::runtime_error(std::string("send: ") + std::strerror(errno));
        done += static_cast<std::size_t>(n);
    }
}

void RawClient::send_raw(const void* data, std::size_t n) {
    auto* p = static_cast<const std::uint8_t*>(data);
    while (n > 0) {
        auto r = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

bool RawClient::read_exact(void* data, std::size_t n) {
    auto* p = static_cast<std::uint8_t*>(data);
    while (n > 0) {
        if (!readable()) return false;
        auto r = ::recv(fd_, p, n, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

std::vector<std::uint8_t> RawClient::recv(std::size_t n) {
    std::vector<std::uint8_t> out(n);
    std::size_t done = 0;
    while (done < n) {
        if (!readable()) throw std::runtime_error("recv: no data for 30 s");
        ssize_t got = ::recv(fd_, out.data() + done, n - done, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got == 0) throw std::runtime_error("recv: connection closed");
        if (got < 0) throw std::runtime_error(std::string("recv: ") + std::strerror(errno));
        done += static_cast<std::size_t>(got);
    }
    return out;
}

bool RawClient::closed_by_server() {
    if (!readable()) return false;
    std::uint8_t b;
    return ::recv(fd_, &b, 1, 0) == 0;
}

bool RawClient::wait_closed() {
    char buf[4096];
    for (;;) {
        if (!readable()) return false;
        ssize_t got = ::recv(fd_, buf, sizeof buf, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return true;   // EOF or reset
    }
}

std::uint16_t RawClient::greet() {
    auto g = recv(greeting_size);
    if (load_u64(g.data()) != nbd_magic || load_u64(g.data() + 8) != ihaveopt)
        throw std::runtime_error("bad greeting");
    auto flags = load_u16(g.data() + 16);
    no_zeroes_ = (flags & flag_no_zeroes) != 0;
    std::vector<std::uint8_t> reply(4);
    store_u32(reply.data(), flag_c_fixed_newstyle | (no_zeroes_ ? flag_c_no_zeroes : 0u));
    send(reply);
    return flags;
}

std::uint64_t RawClient::open_export(const std::string& name) {
    greet();
    send_option(static_cast<std::uint32_t>(Option::export_name), {name.begin(), name.end()});
    auto info = recv(10 + (no_zeroes_ ? 0 : 124));
    return load_u64(info.data());
}

void RawClient::send_option(std::uint32_t option, const std::vector<std::uint8_t>& data) {
    send(encode_option(option, data));
}

nbd::OptionReply RawClient::recv_option_reply() {
    auto bytes = recv(option_reply_header_size);
    auto rest = recv(load_u32(bytes.data() + 16));
    bytes.insert(bytes.end(), rest.begin(), rest.end());
    nbd::OptionReply reply;
    if (decode_option_reply(bytes, reply).value_or(0) != bytes.size())
        throw std::runtime_error("not an option reply");
    return reply;
}

bool RawClient::handshake(const std::string& export_name, bool structured) {
    try {
        greet();
        if (structured) {
            send_option(static_cast<std::uint32_t>(Option::structured_reply), {});
            if (recv_option_reply().type != rep_ack) return false;
            structured_ = true;
        }
        send_option(static_cast<std::uint32_t>(Option::go), encode_info_request(export_name, {}));
        for (;;) {
            auto r = recv_option_reply();
            if (r.type == rep_ack) return true;
            if (r.type != rep_info) return false;
            if (r.data.size() == 12 && load_u16(r.data.data()) == info_export) {
                size_ = load_u64(r.data.data() + 2);
                flags_ = load_u16(r.data.data() + 10);
            }
        }
    } catch (const std::runtime_error&) {
        return false;
    }
}

std::vector<std::uint8_t> RawClient::request(std::uint16_t type, std::uint64_t cookie,
                                             std::uint64_t offset, std::uint32_t length,
                                             std::uint16_t flags, std::uint32_t magic) {
    RequestHeader h;
    h.type = type;
    h.cookie = cookie;
    h.offset = offset;
    h.length = length;
    h.flags = flags;
    auto bytes = encode_request(h);
    store_u32(bytes.data(), magic);
    return {bytes.begin(), bytes.end()};
}

void RawClient::send(std::uint16_t type, std::uint64_t cookie, std::uint64_t offset, std::uint32_t length,
                     std::uint16_t flags, const std::vector<std::uint8_t>& payload) {
    auto msg = request(type, cookie, offset, length, flags);
    msg.insert(msg.end(), payload.begin(), payload.end());
    send_raw(msg.data(), msg.size());
}

std::uint32_t RawClient::recv_simple_reply(std::uint64_t cookie) {
    auto r = recv(simple_reply_size);
    if (load_u32(r.data()) != simple_reply_magic) throw std::runtime_error("not a simple reply");
    if (load_u64(r.data() + 8) != cookie) throw std::runtime_error("reply to another handle");
    return load_u32(r.data() + 4);
}

std::optional<Reply> RawClient::receive(std::uint32_t read_length) {
    Reply reply;
    if (!structured_) {
        reply.simple = true;
        std::uint8_t h[simple_reply_size];
        if (!read_exact(h, sizeof h) || load_u32(h) != simple_reply_magic) return std::nullopt;
        reply.error = load_u32(h + 4);
        reply.cookie = load_u64(h + 8);
        if (reply.error == 0 && read_length > 0) {
            reply.data.resize(read_length);
            if (!read_exact(reply.data.data(), read_length)) return std::nullopt;
        }
        return reply;
    }
    for (bool first = true;; first = false) {
        std::uint8_t h[structured_reply_size];
        // A simple reply is allowed for anything but a READ: it is the
        // first 16 bytes of what would otherwise be a chunk header.
        if (!read_exact(h, simple_reply_size)) return std::nullopt;
        if (first && load_u32(h) == simple_reply_magic) {
            if (read_length > 0) return std::nullopt;   // a READ's data needs a chunk
            reply.simple = true;
            reply.error = load_u32(h + 4);
            reply.cookie = load_u64(h + 8);
            return reply;
        }
        if (load_u32(h) != structured_reply_magic ||
            !read_exact(h + simple_reply_size, structured_reply_size - simple_reply_size))
            return std::nullopt;
        std::uint16_t flags = load_u16(h + 4);
        std::uint16_t type = load_u16(h + 6);
        reply.cookie = load_u64(h + 8);
        std::vector<std::uint8_t> payload(load_u32(h + 16));
        if (!read_exact(payload.data(), payload.size())) return std::nullopt;
        if (type == chunk_offset_data) {
            if (payload.size() < 9) return std::nullopt;
            reply.data.assign(payload.begin() + 8, payload.end());
        } else if (type == chunk_error) {
            if (payload.size() < 6) return std::nullopt;
            reply.error = load_u32(payload.data());
        } else if (type != chunk_none) {
            return std::nullopt;
        }
        if (flags & reply_flag_done) return reply;
    }
}

}   // namespace nbdsched::testlib
