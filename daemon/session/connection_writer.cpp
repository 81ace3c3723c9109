// The writing half of Connection: replies queue up as requests finish (in
// any order) and leave in batches, one scatter-gather write at a time, so
// the socket never sees two writers and a reply is never copied.
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <spdlog/spdlog.h>
#include <utility>

#include "daemon/session/connection.hpp"
#include "nbd/block_status.hpp"

namespace nbdsched::daemon {

namespace {
// Buffers bigger than this go back to the allocator instead of the free list.
constexpr std::size_t keep_buffer = 1u << 20;
}   // namespace

IoRequest& Connection::acquire() {
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
    ++inflight_;
    device_->inflight_budget().take_request(group_, std::exchange(has_ticket_, false));
    return *r;
}

void Connection::release(IoRequest& r) {
    --inflight_;
    inflight_bytes_ -= r.charged_bytes;
    device_->inflight_budget().give(group_, r.charged_bytes);
    r.charged_bytes = 0;
    if (r.buffer.capacity() > keep_buffer) r.buffer.release();
    free_.push_back(&r);
}

void Connection::request_done(IoRequest& r) {
    if (r.backend_errno != 0) r.error = nbd::errno_to_nbd(r.backend_errno);
    if (closed_) {
        release(r);
        return maybe_finish();
    }
    queue_reply(r);
}

void Connection::queue_reply(IoRequest& r) {
    const bool ok = r.error == 0;
    if (ok && r.header.type == static_cast<std::uint16_t>(nbd::Command::block_status)) {
        r.reply_size = static_cast<std::uint8_t>(nbd::encode_block_status_header(r.reply, r.header.cookie, r.data_bytes));
        r.send_data = true;
    } else {
        r.reply_size = static_cast<std::uint8_t>(nbd::encode_reply(r.reply, limits_.structured, r.header, r.error));
        r.send_data = ok && r.header.type == static_cast<std::uint16_t>(nbd::Command::read) && r.header.length > 0;
        r.data_bytes = r.send_data ? r.header.length : 0;
    }
    pending_.push_back(&r);
    // While parsing, replies wait for the end of the parse: one write for
    // the whole batch instead of one per request.
    if (!parsing_) flush_replies();
}

void Connection::flush_replies() {
    if (writing_ || pending_.empty() || closed_) return;
    batch_.swap(pending_);
    iov_.clear();
    for (auto* r : batch_) {
        iov_.emplace_back(r->reply.data(), r->reply_size);
        if (r->send_data) iov_.emplace_back(r->buffer.data(), r->data_bytes);
    }
    writing_ = true;
    auto done = [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) { self->on_written(ec); };
    if (!tls_) {
        // A span, not the vector: async_write copies its buffer sequence.
        boost::asio::async_write(socket_, std::span<const boost::asio::const_buffer>(iov_), std::move(done));
        return;
    }
    tls_out_.clear();
    for (const auto& b : iov_) {
        const auto* p = static_cast<const std::uint8_t*>(b.data());
        tls_out_.insert(tls_out_.end(), p, p + b.size());
    }
    boost::asio::async_write(*tls_, boost::asio::buffer(tls_out_), std::move(done));
}

void Connection::on_written(const boost::system::error_code& ec) {
    writing_ = false;
    for (auto* r : batch_) release(*r);
    batch_.clear();
    if (tls_out_.capacity() > keep_buffer) tls_out_ = {};   // one large reply must not pin its copy
    if (ec) {
        if (!closed_) close("write: " + ec.message());
        return maybe_finish();
    }
    flush_replies();
    resume();
    maybe_finish();
}

// Closes a connection that will read no more once everything it owes is
// written, and reports it finished once nothing of it is left anywhere.
void Connection::maybe_finish() {
    if (finished_ || !stop_reading_) return;
    if (inflight_ != 0 || writing_ || !pending_.empty()) return;
    if (!closed_) {
        closed_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(Socket::shutdown_both, ignored);
        socket_.close(ignored);
        spdlog::debug("{}: closed", tag());
    }
    if (reading_) return;   // its handler still refers to our buffers
    finished_ = true;
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
