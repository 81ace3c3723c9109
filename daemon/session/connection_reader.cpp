// The reading half of Connection's transmission phase: requests are parsed
// out of the read buffer (a single read usually carries many headers: the
// connection's small one, or a large pooled one while reads fill that),
// validated, and submitted to the device. WRITE payloads go straight into
// the device's memory where it offers that (RAM: place_payload), else into
// the request's buffer: copied out of the read buffer, or read from the
// socket directly when large.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <cerrno>
#include <climits>
#include <cstring>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <system_error>

#include "common/device_bytes.hpp"
#include "daemon/session/connection.hpp"
#include "nbd/block_status.hpp"

namespace nbdsched::daemon {

namespace {
// Payload left over this size is read into the request's own buffer
// instead of passing through the read buffer.
constexpr std::size_t direct_payload = 64u << 10;
// The most a payload's low-water mark asks the kernel to gather before it
// wakes the loop (the kernel caps it at half the receive buffer's limit).
constexpr std::uint64_t low_water_cap = 1u << 20;

sched::Op op_of(std::uint16_t type) {
    switch (static_cast<nbd::Command>(type)) {
    case nbd::Command::write: return sched::Op::write;
    case nbd::Command::flush: return sched::Op::flush;
    case nbd::Command::trim: return sched::Op::trim;
    case nbd::Command::write_zeroes: return sched::Op::write_zeroes;
    default: return sched::Op::read;
    }
}

// Copies n bytes to the pieces of an in-place payload, from byte `at` of it on.
void copy_to(const std::vector<std::span<std::byte>>& targets, std::size_t at, const std::uint8_t* src, std::size_t n) {
    for (auto t : targets) {
        if (n == 0) return;
        if (at >= t.size()) {
            at -= t.size();
            continue;
        }
        const std::size_t k = std::min(n, t.size() - at);
        copy_device_bytes(t.data() + at, src, k);
        src += k;
        n -= k;
        at = 0;
    }
}
}   // namespace

// Over one of its limits the connection stops parsing with a complete
// request in the buffer, and joins the device's line when it is the device
// that refuses it (its own limits lift as its replies leave: on_written).
// The check and the line under one hold of the device: room a connection on
// another loop gave back between the two would otherwise find nobody in
// line, and nothing would wake this one.
[[gnu::hot]] bool Connection::pause_if_over_limits() {
    auto held = device_->hold();
    const bool own = inflight_ >= context_.limits.max_inflight_per_connection ||
                     inflight_bytes_ >= context_.limits.max_inflight_bytes_per_connection;
    const bool device = !device_->inflight_budget().admits(group_, has_ticket_);
    if (!own && !device) return false;
    paused_ = true;
    if (device && !waiting_budget_) {
        waiting_budget_ = true;
        device_->inflight_budget().wait(group_, std::weak_ptr<Connection>(shared_from_this()));
    }
    return true;
}

void Connection::resume() {
    if (!paused_ || closed_) return;
    if (pause_if_over_limits()) return;
    paused_ = false;
    parse();
}

// Called holding the device (from inside give()/wait()), maybe on another
// loop: the two flags are only ever touched holding it.
void Connection::budget_available() {
    waiting_budget_ = false;
    has_ticket_ = true;
    // Not from inside another connection's release(): on our own turn.
    boost::asio::post(socket_.get_executor(), [self = shared_from_this()] { self->resume(); });
}

[[gnu::hot]] void Connection::charge(IoRequest& r, std::uint64_t bytes) {
    r.charged_bytes = bytes;
    inflight_bytes_ += bytes;
    auto held = device_->hold();
    device_->inflight_budget().take_bytes(group_, bytes);
}

void Connection::read_more() {
    if (reading_ || stop_reading_ || closed_ || (parking_ && rstate_ == ReadState::header)) return;
    if (rbeg_ > 0) {   // keep the unparsed tail at the front
        std::memmove(rbuf_, rbuf_ + rbeg_, rend_ - rbeg_);
        rend_ -= rbeg_;
        rbeg_ = 0;
    }
    pick_read_buffer();
    reading_ = true;
    auto buffer = boost::asio::buffer(rbuf_ + rend_, rcap_ - rend_);
    with_stream([&](auto& stream) {
        stream.async_read_some(buffer, in_slot(*read_slot_, [self = shared_from_this()](
                                                                const boost::system::error_code& ec, std::size_t n) {
                                   self->on_read(ec, n);
                               }));
    });
}

// Reads that fill the small buffer go to a large one from the thread's
// pool; once a read would have fitted the small one again, the large one
// goes back. Between reads the unparsed tail is at most a partial header.
void Connection::pick_read_buffer() {
    const bool big = big_.capacity() != 0;
    if (busy_ == big || rend_ > small_read_size) return;
    if (busy_) {
        big_.reserve(read_buffer_size);
        std::memcpy(big_.data(), small_.data(), rend_);
        rbuf_ = reinterpret_cast<std::uint8_t*>(big_.data());
        rcap_ = read_buffer_size;
        return;
    }
    std::memcpy(small_.data(), big_.data(), rend_);
    big_.release();
    rbuf_ = small_.data();
    rcap_ = small_read_size;
}

void Connection::on_read(const boost::system::error_code& ec, std::size_t n) {
    reading_ = false;
    if (closed_) return maybe_finish();
    if (ec == boost::asio::error::operation_aborted && parking_) return maybe_finish();   // maybe_park cancelled it
    if (ec) {
        // A TLS peer that hangs up without close_notify: an EOF as well.
        if (ec == boost::asio::error::eof || ec == boost::asio::ssl::error::stream_truncated || stop_reading_) {
            if (!stop_reading_ || current_ || rstate_ != ReadState::header)
                spdlog::debug("{}: client closed the connection", tag());
            if (rstate_ != ReadState::header)
                return close("connection closed in the middle of a request", spdlog::level::warn);
            stop_reading_ = true;
            return maybe_finish();
        }
        return close("read: " + ec.message());
    }
    rend_ += n;
    busy_ = rbuf_ != small_.data() ? n >= small_read_size : rend_ == rcap_;
    parse();
}

// Moves payload bytes out of the read buffer. Returns false when the rest
// must come from the socket.
[[gnu::hot]] bool Connection::consume_payload() {
    std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(rend_ - rbeg_, payload_left_));
    if (rstate_ == ReadState::payload) {
        if (current_->pinned)
            copy_to(current_->targets, payload_got_, rbuf_ + rbeg_, n);
        else if (!current_->in_place)   // in place and not pinned: written as it came (write_arrived)
            std::memcpy(payload_buffer_at(), rbuf_ + rbeg_, n);
    }
    rbeg_ += n;
    payload_got_ += n;
    payload_left_ -= n;
    if (payload_left_ > 0) return false;
    if (rstate_ == ReadState::payload) {
        IoRequest& r = *current_;
        current_ = nullptr;
        rstate_ = ReadState::header;
        payload_received(r);
    } else {
        payload_watched_ = false;   // a discarded payload timed while it came (watch_request_stall) is all in
    }
    rstate_ = ReadState::header;
    return true;
}

// The rest of a large WRITE payload goes straight into the request's
// buffer or the device's memory, as much per recv as the socket holds (Asio's reads take 64 KiB
// each and pass through the event loop between them); the connection waits
// for the socket only when it is empty.
void Connection::read_payload_direct() {
    rbeg_ = rend_ = 0;
    busy_ = false;   // the next read is likely the next header: into the small buffer
    if (tls_) return read_payload_tls();
    bool progressed = false;
    while (payload_left_ > 0) {
        const ssize_t n = current_->in_place
                              ? recv_in_place()
                              : ::recv(socket_.native_handle(), payload_buffer_at(), payload_left_, MSG_DONTWAIT);
        if (n > 0) {
            progressed = true;
            payload_got_ += static_cast<std::size_t>(n);
            payload_left_ -= static_cast<std::size_t>(n);
            continue;
        }
        if (n == 0) return close("reading a WRITE payload: End of file");
        if (errno == EINTR) continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            return close("reading a WRITE payload: " + std::system_category().message(errno));
        watch_payload_stall(progressed);
        raise_low_water();
        reading_ = true;
        socket_.async_wait(Socket::wait_read,
                           in_slot(*read_slot_, [self = shared_from_this()](const boost::system::error_code& ec) {
                               self->reading_ = false;
                               if (self->closed_) return self->maybe_finish();
                               if (ec) return self->close("reading a WRITE payload: " + ec.message());
                               self->read_payload_direct();
                           }));
        return;
    }
    payload_done();
}

// Where the next payload byte goes in the request's buffer: a stalled
// in-place payload's buffer holds only what came after its pin went.
std::byte* Connection::payload_buffer_at() {
    return current_->buffer.data() + (payload_got_ - current_->placed);
}

// The first wait for the rest of an in-place payload starts the timer (of
// any payload, with limits.stall_timeout); the payload ending
// (payload_received) or the connection closing ends it. A wait after bytes
// came starts the stall anew for limits.stall_timeout.
void Connection::watch_payload_stall(bool progressed) {
    if (!current_->in_place && context_.limits.stall_timeout.count() == 0) return;
    if (progressed || !payload_watched_) payload_wait_since_ = std::chrono::steady_clock::now();
    if (payload_watched_) return;
    payload_watched_ = true;
    payload_checks_ = false;
    payload_timer_.start(socket_.get_executor(), stall_copy_after, [self = shared_from_this()] {
        if (self->payload_watched_) self->lower_low_water(LowWater::done);
        self->unpin_stalled_payload();
        self->time_stall(StallSide::payload);
    });
}

// Over TCP the loop woke for each burst of segments of a large payload
// (5-6 recv and epoll_wait per MiB), and the client's sends waited on those
// wake-ups. A low-water mark of the bytes still to come (SO_RCVLOWAT; the
// kernel grows the receive buffer to hold them) has epoll wake the loop once
// they are in. Only until the payload's stall step (stall_copy_after): after
// that each arrival wakes the loop again, so a client that sends slowly
// shows progress to the stall clock (limits.stall_timeout). A Unix socket's
// epoll ignores the mark.
void Connection::raise_low_water() {
    if (!tcp_ || tls_ || low_water_ == LowWater::done) return;
    const int bytes = static_cast<int>(std::min<std::uint64_t>(payload_left_, low_water_cap));
    if (::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &bytes, sizeof bytes) == 0)
        low_water_ = LowWater::raised;
}

// Back to waking at every byte: before the next header is read (or once the
// payload's stall step came).
void Connection::lower_low_water(LowWater next) {
    if (low_water_ == LowWater::raised) {
        const int one = 1;
        ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVLOWAT, &one, sizeof one);
    }
    low_water_ = next;
}

// The client has not sent the whole payload within stall_copy_after of the
// first wait for it: what came is settled in place (the pages nothing came
// into go back, as when a client dies mid-payload), the pin goes, and the
// rest is received into the request's buffer and written at dispatch. A pin
// held across the wait would keep every page any client of the device frees
// meanwhile (backend/page_pins.hpp), for as long as the client stays stalled.
// Runs only between reads: never in the middle of one.
void Connection::unpin_stalled_payload() {
    if (!payload_watched_ || closed_ || !current_ || !current_->in_place || !current_->pinned)
        return;
    IoRequest& r = *current_;
    r.pinned->unpin_written(r.pin, r.offset, r.length);
    r.pinned = nullptr;
    r.in_place = false;
    r.placed = payload_got_;
    r.buffer.reserve(r.length - r.placed);
    spdlog::debug("{}: WRITE payload not all sent within {} ms: {} of {} bytes placed, the rest into a buffer",
                  tag(), stall_copy_after.count(), r.placed, r.length);
}

// One recvmsg() into the in-place payload's pieces from payload_got_ on.
ssize_t Connection::recv_in_place() {
    recv_iov_.clear();
    std::size_t at = payload_got_;
    for (auto t : current_->targets) {
        if (recv_iov_.size() == IOV_MAX) break;
        if (at >= t.size()) {
            at -= t.size();
            continue;
        }
        recv_iov_.push_back({t.data() + at, t.size() - at});
        at = 0;
    }
    msghdr m{};
    m.msg_iov = recv_iov_.data();
    m.msg_iovlen = recv_iov_.size();
    DeviceBytesAccess access;   // the kernel's copy into the pages, as copy_to()'s
    return ::recvmsg(socket_.native_handle(), &m, MSG_DONTWAIT);
}

// Over TLS the payload comes as the stream decrypts it, a record (at most
// 16 KiB) at a time. Each read is a wait for the client, timed from the
// last bytes of the payload that came (limits.stall_timeout): the stream's
// own reads of the socket do not show.
void Connection::read_payload_tls() {
    watch_payload_stall(true);
    reading_ = true;
    auto on_payload = [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
        self->reading_ = false;
        if (self->closed_) return self->maybe_finish();
        if (ec) return self->close("reading a WRITE payload: " + ec.message());
        self->payload_got_ += n;
        self->payload_left_ -= n;
        if (self->payload_left_ > 0) return self->read_payload_tls();
        self->payload_done();
    };
    auto buffer = boost::asio::buffer(payload_buffer_at(), static_cast<std::size_t>(payload_left_));
    tls_->async_read_some(buffer, in_slot(*read_slot_, std::move(on_payload)));
}

void Connection::payload_done() {
    lower_low_water(LowWater::unused);
    IoRequest& r = *current_;
    current_ = nullptr;
    rstate_ = ReadState::header;
    payload_received(r);
    parse();
}

// An in-place payload's pin lasts while it is received (a connection closed
// meanwhile lets go of it in release(), a stalled client's payload in
// unpin_stalled_payload()); once it is in, the data is the
// device's and the pin goes, and the backend takes back the pages it
// allocated for the payload that hold only zeros.
[[gnu::hot]] void Connection::payload_received(IoRequest& r) {
    payload_watched_ = false;
    if (r.in_place && r.pinned) {
        r.pinned->unpin_written(r.pin, r.offset, r.length);
        r.pinned = nullptr;
    }
    submit(r);
}

// A WRITE's payload goes straight into the device's memory where the device
// offers it: one copy (the kernel's, or write()'s out of the read buffer)
// instead of two. A payload all in the read buffer is written at once
// (Device::write_arrived); the rest of a large one is received into the
// pages it pins (Device::pin_write). Not over TLS (read_payload_tls reads
// into the buffer). Zeros written over a hole stay a hole either way: the
// backend's write() sees the data before it allocates, and a payload received
// in place gives back the pages it left all zeros (unpin_written). A small
// payload not all here yet takes the buffer path, and so does a large one
// over TCP: there the kernel's copy straight into the device's cold pages
// cost the client more CPU than a copy into the request's buffer and
// write()'s after it (fio's 1 MiB writes over loopback: a fifth less of
// fio's CPU per write, the daemon's the same; docs/data-path.md).
[[gnu::hot]] bool Connection::place_payload(IoRequest& r) {
    const auto& h = r.header;
    if (tls_) return false;
    if (rend_ - rbeg_ >= h.length)
        return device_->write_arrived(r, binding_->offset + h.offset,
                                      std::as_bytes(std::span(rbuf_ + rbeg_, h.length)));
    if (h.length < direct_payload || tcp_) return false;
    return device_->pin_write(r, binding_->offset + h.offset, h.length);
}

[[gnu::hot]] void Connection::parse() {
    if (parsing_ || closed_) return;
    parsing_ = true;
    bool direct = false;
    while (!closed_ && !stop_reading_) {
        if (rstate_ != ReadState::header) {
            if (consume_payload()) continue;
            direct = rstate_ == ReadState::payload && payload_left_ >= direct_payload;
            break;
        }
        if (parking_) break;   // a request boundary: the rest stays in the buffer for the next process
        // Graceful stop: the request just read was the last.
        if (draining_) {
            stop_reading_ = true;
            break;
        }
        // Over a limit, the socket is still read until a whole request is
        // buffered (at most the read buffer): only a connection with a
        // request to submit waits in the device's line.
        if (rend_ - rbeg_ < nbd::request_size) break;
        if (pause_if_over_limits()) break;
        auto header = nbd::decode_request(
            std::span<const std::uint8_t, nbd::request_size>(rbuf_ + rbeg_, nbd::request_size));
        if (!header) {
            parsing_ = false;
            return close("malformed request (bad magic); other connections are not affected", spdlog::level::warn);
        }
        rbeg_ += nbd::request_size;
        payload_watched_ = false;   // a header timed while partial (watch_request_stall) is whole
        handle_request(*header);
    }
    parsing_ = false;
    flush_replies();   // one write for everything answered during this parse
    if (direct) {
        read_payload_direct();
    } else if (!paused_) {
        // Waiting for the rest of a request the client began: timed.
        if (rstate_ == ReadState::payload && current_)
            watch_payload_stall(true);
        else if (rstate_ == ReadState::discard || rend_ > rbeg_)
            watch_request_stall();
        read_more();
    }
    maybe_finish();
}

[[gnu::hot]] void Connection::handle_request(const nbd::RequestHeader& h) {
    using nbd::Command;
    if (h.type == static_cast<std::uint16_t>(Command::disc)) {
        spdlog::debug("{}: NBD_CMD_DISC", tag());
        stop_reading_ = true;
        return;
    }
    IoRequest& r = acquire();
    r.header = h;
    r.error = nbd::validate_request(h, limits_);
    if (r.error != 0)
        spdlog::debug("{}: {} offset {} length {} flags 0x{:x}: error {}", tag(), nbd::command_name(h.type),
                      h.offset, h.length, h.flags, r.error);
    if (nbd::has_payload(h)) {
        payload_left_ = h.length;
        payload_got_ = 0;
        if (r.error != 0 || h.length == 0) {
            rstate_ = ReadState::discard;   // consumed, never stored
            queue_reply(r);
            return;
        }
        if (!place_payload(r)) r.buffer.reserve(h.length);
        charge(r, h.length);
        current_ = &r;
        rstate_ = ReadState::payload;
        return;
    }
    bool empty = h.length == 0 && h.type != static_cast<std::uint16_t>(Command::flush);
    if (r.error != 0 || empty) return queue_reply(r);
    if (h.type == static_cast<std::uint16_t>(Command::read)) {
        r.buffer.reserve(h.length);
        charge(r, h.length);
    }
    if (h.type == static_cast<std::uint16_t>(Command::block_status))
        r.buffer.reserve(Device::max_block_status_extents * nbd::block_descriptor_size);
    submit(r);
}

[[gnu::hot]] void Connection::submit(IoRequest& r) {
    const auto& h = r.header;
    r.sink = this;
    r.home = loop_;
    r.op = op_of(h.type);
    r.offset = binding_->offset + h.offset + r.placed;
    r.length = r.op == sched::Op::flush ? 0 : h.length - r.placed;
    r.fua = (h.flags & nbd::cmd_flag_fua) != 0 && r.op != sched::Op::read && r.op != sched::Op::flush;
    r.may_trim = (h.flags & nbd::cmd_flag_no_hole) == 0;
    r.fast_zero = (h.flags & nbd::cmd_flag_fast_zero) != 0;
    r.queue = queue_;
    r.group = group_;   // the queue's group (rules: may have placed it elsewhere than the export's group)
    r.may_pin = r.op == sched::Op::read && h.type == static_cast<std::uint16_t>(nbd::Command::read);
    const bool metadata = h.type == static_cast<std::uint16_t>(nbd::Command::block_status) ||
                          h.type == static_cast<std::uint16_t>(nbd::Command::cache);
    if (metadata)
        device_->submit_metadata(r);
    else
        device_->submit(r);
}

}   // namespace nbdsched::daemon
