#include "tools/load/load_loop.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>
#include <vector>

#include "kernel/connect.hpp"
#include "nbd/transmission.hpp"
#include "tools/load/reply_stream.hpp"

namespace nbdsched::load {

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::uint32_t sector = 512;
constexpr std::size_t read_buffer_size = 256 * 1024;

// Where the next request goes: xorshift64 over the export's blocks, or the
// block after the last one.
class Offsets {
public:
    Offsets(const LoadSpec& spec) : random_(spec.random), block_(spec.block), blocks_(spec.export_size / spec.block),
                                    state_(spec.seed | 1) {}
    std::uint64_t next() {
        if (!random_) {
            auto at = next_;
            next_ = (next_ + 1) % blocks_;
            return at * block_;
        }
        state_ ^= state_ << 13;
        state_ ^= state_ >> 7;
        state_ ^= state_ << 17;
        return state_ % blocks_ * block_;
    }

private:
    bool random_;
    std::uint64_t block_, blocks_, state_, next_ = 0;
};

void stamp(std::uint8_t* data, std::uint32_t length, std::uint64_t offset) {
    for (std::uint32_t at = 0; at < length; at += sector) {
        std::uint64_t where = offset + at;
        for (int i = 0; i < 8; ++i) data[at + i] = static_cast<std::uint8_t>(where >> (8 * i));
    }
}

// sendmsg until every byte went, advancing over what a short send took;
// MSG_NOSIGNAL: a server that went away is an error, not a SIGPIPE.
bool send_all(int socket, iovec* iov, int count) {
    while (count > 0) {
        msghdr m{};
        m.msg_iov = iov;
        m.msg_iovlen = static_cast<std::size_t>(std::min(count, IOV_MAX));
        ssize_t n = ::sendmsg(socket, &m, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return false;
        auto sent = static_cast<std::size_t>(n);
        while (count > 0 && sent >= iov->iov_len) {
            sent -= iov->iov_len;
            ++iov;
            --count;
        }
        if (count > 0) {
            iov->iov_base = static_cast<std::uint8_t*>(iov->iov_base) + sent;
            iov->iov_len -= sent;
        }
    }
    return true;
}

// "no reply for 0.5 s" for a timed-out call, else the errno's text.
std::string io_failure(const char* doing, const char* stalled, std::chrono::milliseconds timeout) {
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
        char text[96];
        std::snprintf(text, sizeof text, "%s for %g s", stalled, double(timeout.count()) / 1000);
        return text;
    }
    return std::string(doing) + ": " + std::strerror(errno);
}

}   // namespace

LoadTotals run_load(int socket, const LoadSpec& spec) {
    LoadTotals totals;
    kernel::set_io_timeouts(socket, spec.stall_timeout);
    const auto command = static_cast<std::uint16_t>(spec.write ? nbd::Command::write : nbd::Command::read);
    std::vector<std::array<std::uint8_t, nbd::request_size>> headers(spec.depth);
    std::vector<std::uint8_t> payloads(spec.write ? std::size_t(spec.depth) * spec.block : 0, sector_fill);
    std::vector<iovec> iov(2 * std::size_t(spec.depth));
    std::vector<std::uint8_t> incoming(read_buffer_size);
    std::vector<unsigned> free_slots;
    for (unsigned s = spec.depth; s > 0; --s) free_slots.push_back(s - 1);
    std::vector<nbd::SimpleReply> replies;
    replies.reserve(spec.depth);
    ReplyStream stream(spec.depth);
    Offsets offsets(spec);

    const auto start = Clock::now();
    const auto deadline = start + spec.duration;
    auto now = start;
    unsigned in_flight = 0;
    for (;;) {
        int parts = 0;
        while (now < deadline && !free_slots.empty()) {
            unsigned slot = free_slots.back();
            free_slots.pop_back();
            nbd::RequestHeader r{0, command, slot, offsets.next(), spec.block};
            headers[slot] = nbd::encode_request(r);
            iov[parts++] = {headers[slot].data(), headers[slot].size()};
            if (spec.write) {
                std::uint8_t* data = payloads.data() + std::size_t(slot) * spec.block;
                stamp(data, spec.block, r.offset);
                iov[parts++] = {data, spec.block};
            }
            stream.expect(slot, spec.write ? 0 : spec.block);
            ++in_flight;
        }
        if (parts > 0 && !send_all(socket, iov.data(), parts)) {
            totals.failure = io_failure("sending requests", "the server took no request bytes", spec.stall_timeout);
            break;
        }
        if (in_flight == 0) break;
        ssize_t n = ::read(socket, incoming.data(), incoming.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            totals.failure = n == 0 ? "the server closed the connection"
                                    : io_failure("reading replies", "no reply", spec.stall_timeout);
            break;
        }
        replies.clear();
        if (!stream.feed({incoming.data(), static_cast<std::size_t>(n)}, replies)) {
            totals.failure = "a reply that is not a simple reply to a request in flight";
            break;
        }
        for (const auto& reply : replies) {
            free_slots.push_back(static_cast<unsigned>(reply.cookie));
            --in_flight;
            ++totals.requests;
            if (reply.error != 0)
                ++totals.errors;
            else
                totals.bytes += spec.block;
        }
        now = Clock::now();
    }
    totals.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    if (totals.failure.empty()) {
        auto disc = nbd::encode_request({0, static_cast<std::uint16_t>(nbd::Command::disc), 0, 0, 0});
        (void)!::send(socket, disc.data(), disc.size(), MSG_NOSIGNAL);
    }
    return totals;
}

}   // namespace nbdsched::load
