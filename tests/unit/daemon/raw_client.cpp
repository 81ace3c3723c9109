#include "raw_client.hpp"

#include <cstring>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nbd/handshake.hpp"
#include "nbd/wire.hpp"

namespace nbdsched::testing {

std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed) {
    std::vector<std::uint8_t> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::uint8_t>(seed + i * 7 + (i >> 9));
    return v;
}

using namespace nbdsched::nbd;

RawClient::RawClient(const std::string& socket_path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd_);
        fd_ = -1;
    }
    timeval tv{20, 0};   // a hung server fails the test instead of hanging it
    if (fd_ >= 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

RawClient::~RawClient() {
    if (fd_ >= 0) ::close(fd_);
}

bool RawClient::read_exact(void* data, std::size_t n) {
    auto* p = static_cast<std::uint8_t*>(data);
    while (n > 0) {
        auto r = ::read(fd_, p, n);
        if (r <= 0) return false;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
    return true;
}

void RawClient::send_raw(const void* data, std::size_t n) {
    auto* p = static_cast<const std::uint8_t*>(data);
    while (n > 0) {
        auto r = ::send(fd_, p, n, MSG_NOSIGNAL);
        if (r <= 0) return;
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

bool RawClient::handshake(const std::string& export_name, bool structured) {
    std::uint8_t greeting[greeting_size];
    if (!read_exact(greeting, sizeof greeting)) return false;
    if (load_u64(greeting) != nbd_magic || load_u64(greeting + 8) != ihaveopt) return false;
    std::uint8_t cflags[4];
    store_u32(cflags, flag_c_fixed_newstyle | flag_c_no_zeroes);
    send_raw(cflags, 4);
    auto one_reply = [&](OptionReply& reply) {
        std::uint8_t h[option_reply_header_size];
        if (!read_exact(h, sizeof h)) return false;
        std::vector<std::uint8_t> buf(h, h + sizeof h);
        buf.resize(sizeof h + load_u32(h + 16));
        if (!read_exact(buf.data() + sizeof h, buf.size() - sizeof h)) return false;
        return decode_option_reply(buf, reply).value_or(0) == buf.size();
    };
    if (structured) {
        auto opt = encode_option(static_cast<std::uint32_t>(Option::structured_reply), {});
        send_raw(opt.data(), opt.size());
        OptionReply r;
        if (!one_reply(r) || r.type != rep_ack) return false;
        structured_ = true;
    }
    auto go = encode_option(static_cast<std::uint32_t>(Option::go), encode_info_request(export_name, {}));
    send_raw(go.data(), go.size());
    for (;;) {
        OptionReply r;
        if (!one_reply(r)) return false;
        if (r.type == rep_ack) return true;
        if (r.type != rep_info) return false;
        if (r.data.size() == 12 && load_u16(r.data.data()) == info_export) {
            size_ = load_u64(r.data.data() + 2);
            flags_ = load_u16(r.data.data() + 10);
        }
    }
}

void RawClient::send(std::uint16_t type, std::uint64_t cookie, std::uint64_t offset, std::uint32_t length,
                     std::uint16_t flags, const std::vector<std::uint8_t>& payload) {
    RequestHeader h;
    h.type = type;
    h.cookie = cookie;
    h.offset = offset;
    h.length = length;
    h.flags = flags;
    auto bytes = encode_request(h);
    std::vector<std::uint8_t> msg(bytes.begin(), bytes.end());
    msg.insert(msg.end(), payload.begin(), payload.end());
    send_raw(msg.data(), msg.size());
}

std::optional<Reply> RawClient::receive(std::uint32_t read_length) {
    Reply reply;
    if (!structured_) {
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
    for (;;) {
        std::uint8_t h[structured_reply_size];
        if (!read_exact(h, sizeof h) || load_u32(h) != structured_reply_magic) return std::nullopt;
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

bool RawClient::closed_by_server() {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, 20000) <= 0) return false;
    std::uint8_t b;
    return ::read(fd_, &b, 1) == 0;
}

} // namespace nbdsched::testing
