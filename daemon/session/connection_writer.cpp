// The writing half of Connection: replies queue up as requests finish (in
// any order) and leave in batches, one scatter-gather write at a time, so
// the socket never sees two writers and a reply is never copied (a large
// RAM read's reply is sent from the backend's own memory).
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <utility>

#include "common/device_bytes.hpp"
#include "daemon/session/connection.hpp"
#include "nbd/block_status.hpp"

namespace nbdsched::daemon {

namespace {
// A TLS or stall copy bigger than this goes back to the allocator after its write.
constexpr std::size_t keep_buffer = 1u << 20;
}   // namespace

[[gnu::hot]] IoRequest& Connection::acquire() {
    IoRequest* r;
    if (free_.empty()) {
        all_.push_back(std::make_unique<IoRequest>());
        r = all_.back().get();
    } else {
        r = free_.back();
        free_.pop_back();
    }
    r->error = 0;
    r->charged_bytes = 0;
    r->send_data = false;
    r->backend_errno = 0;
    r->data_bytes = 0;
    r->in_place = false;
    r->placed = 0;
    r->abandoned = false;
    ++inflight_;
    auto held = device_->hold();
    device_->inflight_budget().take_request(group_, std::exchange(has_ticket_, false));
    return *r;
}

// A payload still being received in place when its connection closes is
// settled like one received whole: the pages nothing was put into (or only
// zeros) are given back, so a client cannot take memory by sending the
// header of a large WRITE and hanging up.
[[gnu::hot]] void Connection::release(IoRequest& r) {
    if (r.pinned && r.in_place) {
        r.pinned->unpin_written(r.pin, r.offset, r.length);
        r.pinned = nullptr;
    } else if (r.pinned) {
        r.pinned->unpin(r.pin);
        r.pinned = nullptr;
    }
    --inflight_;
    inflight_bytes_ -= r.charged_bytes;
    {
        auto held = device_->hold();
        device_->inflight_budget().give(group_, r.charged_bytes);
    }
    r.charged_bytes = 0;
    r.buffer.release();   // to the thread's pool: an idle connection holds no data buffers
    free_.push_back(&r);
}

[[gnu::hot]] void Connection::request_done(IoRequest& r) {
    if (r.backend_errno != 0) r.error = nbd::errno_to_nbd(r.backend_errno);
    if (closed_) {
        release(r);
        return maybe_finish();
    }
    queue_reply(r);
}

[[gnu::hot]] void Connection::queue_reply(IoRequest& r) {
    const bool ok = r.error == 0;
    if (ok && r.header.type == static_cast<std::uint16_t>(nbd::Command::block_status)) {
        r.reply_size = static_cast<std::uint8_t>(nbd::encode_block_status_header(r.reply, r.header.cookie, r.data_bytes));
        r.send_data = true;
    } else {
        r.reply_size = static_cast<std::uint8_t>(nbd::encode_reply(r.reply, limits_.structured, r.header, r.error));
        r.send_data = ok && r.header.type == static_cast<std::uint16_t>(nbd::Command::read) && r.header.length > 0;
        r.data_bytes = r.send_data ? r.header.length : 0;
    }
    if (stalled_ && r.send_data) copy_out(r);
    pending_.push_back(&r);
    // While parsing, replies wait for the end of the parse: one write for
    // the whole batch instead of one per request. A reply from outside a
    // parse (a backend's burst of completions, a timer) waits for the end
    // of the handler that delivers it, for the same reason.
    if (parsing_ || flush_posted_) return;
    flush_posted_ = true;
    // To the loop itself: the socket's type-erased executor would allocate
    // the handler's wrapper for itself whatever allocator the handler has.
    boost::asio::post(*loop_, in_slot(*flush_slot_, [self = shared_from_this()] {
        self->flush_posted_ = false;
        self->flush_replies();
    }));
}

[[gnu::hot]] void Connection::flush_replies() {
    if (writing_ || pending_.empty() || closed_) return;
    batch_.swap(pending_);
    iov_.clear();
    for (auto* r : batch_) {
        iov_.push_back({r->reply.data(), r->reply_size});
        if (!r->send_data) continue;
        if (!r->pinned) {
            iov_.push_back({r->buffer.data(), r->data_bytes});
            continue;
        }
        for (auto piece : r->pieces) iov_.push_back({const_cast<std::byte*>(piece.data()), piece.size()});
    }
    writing_ = true;
    if (!tls_) {
        iov_at_ = 0;
        return send_batch();
    }
    tls_out_.clear();
    for (const auto& b : iov_) {
        const auto* p = static_cast<const std::uint8_t*>(b.iov_base);
        tls_out_.insert(tls_out_.end(), p, p + b.iov_len);
    }
    for (auto* r : batch_)   // the copy is what goes out: the device's pages are free again
        if (r->pinned) {
            r->pinned->unpin(r->pin);
            r->pinned = nullptr;
        }
    tls_sent_ = 0;
    send_tls_batch();
}

// Over TLS the batch leaves a record (up to 16 KiB) at a time, each write
// waiting for the socket to take it: timed from the last record it took
// (limits.stall_timeout), as the plain path is from its last byte. Only
// with a timeout set: the timer would cost every batch otherwise.
void Connection::send_tls_batch() {
    if (context_.limits.stall_timeout.count() != 0) watch_stall(true);
    auto done = [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
        self->tls_sent_ += n;
        if (!ec && !self->closed_ && self->tls_sent_ < self->tls_out_.size()) return self->send_tls_batch();
        self->on_written(ec);
    };
    tls_->async_write_some(boost::asio::buffer(tls_out_.data() + tls_sent_, tls_out_.size() - tls_sent_),
                           std::move(done));
}

// Writes the batch now, as far as the socket takes it (up to IOV_MAX pieces
// per sendmsg, where Asio's writes take 64), and waits for room only for
// the rest. A batch the socket took at once is released here (batch_sent);
// an error ends it through a post, as this may run inside a parse.
void Connection::send_batch() {
    boost::system::error_code ec;
    bool progressed = false;
    while (iov_at_ < iov_.size()) {
        msghdr m{};
        m.msg_iov = iov_.data() + iov_at_;
        m.msg_iovlen = std::min<std::size_t>(iov_.size() - iov_at_, IOV_MAX);
        const ssize_t n = ::sendmsg(socket_.native_handle(), &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n >= 0) {
            progressed = progressed || n > 0;
            advance_iov(static_cast<std::size_t>(n));
            continue;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            watch_stall(progressed);
            socket_.async_wait(Socket::wait_write, [self = shared_from_this()](const boost::system::error_code& e) {
                if (e) return self->on_written(e);
                self->send_batch();
            });
            return;
        }
        ec.assign(errno, boost::asio::error::get_system_category());
        boost::asio::post(socket_.get_executor(), [self = shared_from_this(), ec] { self->on_written(ec); });
        return;
    }
    batch_sent();
}

// The batch has left: its requests go back at once, so the next reply needs
// no trip through the event loop (at queue depth 1 that trip was a handler
// and an epoll_wait per request). What may read more, write more or finish
// is posted, and only when there is any: this runs inside a parse or a
// request's completion.
[[gnu::hot]] void Connection::batch_sent() {
    writing_ = false;
    for (auto* r : batch_) release(*r);
    batch_.clear();
    end_stall();
    if (!paused_ && !stop_reading_ && !parking_ && pending_.empty()) return;
    boost::asio::post(socket_.get_executor(), [self = shared_from_this()] { self->after_write(); });
}

[[gnu::hot]] void Connection::advance_iov(std::size_t n) {
    while (n > 0 && iov_at_ < iov_.size()) {
        auto& v = iov_[iov_at_];
        if (n < v.iov_len) {
            v.iov_base = static_cast<std::uint8_t*>(v.iov_base) + n;
            v.iov_len -= n;
            return;
        }
        n -= v.iov_len;
        ++iov_at_;
    }
}

// The first wait of a batch for room starts the stall timer; the batch
// leaving (batch_sent, on_written) stops it. A wait after bytes left starts
// the stall anew for limits.stall_timeout: a slow reader is not a stalled one.
void Connection::watch_stall(bool progressed) {
    if (progressed || !stall_watched_) reply_wait_since_ = std::chrono::steady_clock::now();
    if (stall_watched_) return;
    stall_watched_ = true;
    stall_timer_.start(socket_.get_executor(), stall_copy_after, [self = shared_from_this()] {
        self->unpin_stalled();
        self->time_stall(StallSide::replies);
    });
}

void Connection::end_stall() {
    if (!stall_watched_ && !stalled_) return;
    stall_watched_ = false;
    stalled_ = false;
    stall_timer_.cancel();
    if (stall_copy_.capacity() > keep_buffer) stall_copy_ = {};
}

// What is left of the batch is copied into one buffer, which the next
// sendmsg continues from, and the batch's pins go; so do those of replies
// already queued behind it, and of those queued until the batch leaves.
void Connection::unpin_stalled() {
    if (!stall_watched_ || !writing_ || closed_) return;
    stalled_ = true;
    bool pinned = false;
    for (auto* r : batch_) pinned = pinned || r->pinned != nullptr;
    if (pinned) {
        std::size_t left = 0;
        for (std::size_t i = iov_at_; i < iov_.size(); ++i) left += iov_[i].iov_len;
        stall_copy_.resize(left);
        std::size_t at = 0;
        for (std::size_t i = iov_at_; i < iov_.size(); ++i) {
            copy_device_bytes(stall_copy_.data() + at, iov_[i].iov_base, iov_[i].iov_len);
            at += iov_[i].iov_len;
        }
        iov_.assign(1, iovec{stall_copy_.data(), left});
        iov_at_ = 0;
        for (auto* r : batch_)
            if (r->pinned) {
                r->pinned->unpin(r->pin);
                r->pinned = nullptr;
            }
    }
    for (auto* r : pending_)
        if (r->send_data) copy_out(*r);
    spdlog::debug("{}: client not reading for {} ms: {} replies copied out of the device's pages", tag(),
                  stall_copy_after.count(), batch_.size() + pending_.size());
}

// A queued pinned reply moves to the request's own buffer.
void Connection::copy_out(IoRequest& r) {
    if (!r.pinned) return;
    r.buffer.reserve(r.data_bytes);
    std::size_t at = 0;
    for (auto piece : r.pieces) {
        copy_device_bytes(r.buffer.data() + at, piece.data(), piece.size());
        at += piece.size();
    }
    r.pinned->unpin(r.pin);
    r.pinned = nullptr;
}

void Connection::on_written(const boost::system::error_code& ec) {
    writing_ = false;
    for (auto* r : batch_) release(*r);
    batch_.clear();
    end_stall();
    if (tls_out_.capacity() > keep_buffer) tls_out_ = {};   // one large reply must not pin its copy
    if (ec) {
        if (!closed_) close("write: " + ec.message());
        return maybe_finish();
    }
    after_write();
}

void Connection::after_write() {
    flush_replies();
    resume();
    maybe_finish();
}

// Closes a connection that will read no more once everything it owes is
// written, and reports it finished once nothing of it is left anywhere.
void Connection::maybe_finish() {
    if (parking_) maybe_park();
    if (finished_ || !stop_reading_) return;
    if (inflight_ != 0 || writing_ || !pending_.empty()) return;
    if (!closed_ && tls_active() && !tls_ended_) {
        // close_notify first, once no read is pending on the TLS stream
        // (a cancelled one comes back here through on_read).
        boost::system::error_code ignored;
        if (reading_) socket_.cancel(ignored);
        else if (!tls_ending_) end_tls([self = shared_from_this()] { self->maybe_finish(); });
        return;
    }
    if (!closed_ && draining_ && !tls_ && !linger()) return;
    if (!closed_) {
        closed_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(Socket::shutdown_both, ignored);
        socket_.close(ignored);
        spdlog::debug("{}: closed", tag());
    }
    if (reading_) return;   // its handler still refers to our buffers
    finished_ = true;
    big_.release();
    auto held = device_ ? device_->hold() : DeviceLock::Hold();
    if (has_ticket_) {   // woken in line but closed before using its turn
        has_ticket_ = false;
        device_->inflight_budget().return_ticket(group_);
    }
    if (queue_open_) {
        queue_open_ = false;
        device_->close_queue(queue_);
    }
    boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
        if (self->context_.on_finished) self->context_.on_finished(*self);
    });
}

}   // namespace nbdsched::daemon
