// Connection's part in a planned restart: stop at a request boundary with
// nothing owed to the client (park), describe what the next process needs
// to go on (handover_state), and, in that process, go on (resume).
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstring>
#include <spdlog/spdlog.h>

#include "daemon/session/connection.hpp"

namespace nbdsched::daemon {

void Connection::park() {
    if (closed_ || stop_reading_ || !in_transmission()) return;
    parking_ = true;
    maybe_park();
}

// Parked: between two requests, every reply written, no read pending. An
// idle read is cancelled once the writer is idle too (cancel() would end a
// pending write's wait as well); bytes it would have brought stay in the
// kernel's socket buffer for the next process.
void Connection::maybe_park() {
    if (parked_ || closed_ || stop_reading_ || parsing_ || rstate_ != ReadState::header) return;
    if (inflight_ != 0 || writing_ || !pending_.empty()) return;
    if (!socket_.is_open()) return;   // on its way to its loop: parks there
    if (reading_) {
        boost::system::error_code ignored;
        socket_.cancel(ignored);
        return;
    }
    parked_ = true;
    boost::asio::post(socket_.get_executor(), [self = shared_from_this()] {
        if (self->parked_ && self->context_.on_parked) self->context_.on_parked(*self);
    });
}

void Connection::unpark() {
    if (!parking_) return;
    parking_ = false;
    parked_ = false;
    if (closed_) return;
    parse();   // what is buffered, then read on
}

ConnectionState Connection::handover_state() const {
    ConnectionState s;
    s.id = id_;
    s.peer = peer_;
    s.identity = identity_;
    s.export_name = export_name_;
    s.export_size = limits_.size;
    s.transmission_flags = transmission_flags_;
    s.structured = limits_.structured;
    s.block_status = limits_.block_status;
    s.unread.assign(rbuf_ + rbeg_, rbuf_ + rend_);
    return s;
}

void Connection::resume(const ConnectionState& s, std::optional<sched::GroupId> group) {
    const auto& infos = context_.exports->infos;
    auto info = std::find_if(infos.begin(), infos.end(), [&](const auto& i) { return i.name == s.export_name; });
    if (info == infos.end()) {
        spdlog::error("{}: handed over on export '{}', which this configuration does not have", tag(), s.export_name);
        return close("export gone");
    }
    // A grown export (an image resized before the restart) keeps the size
    // the client negotiated, as a reload does; a shrunk one would fail the
    // client's writes near its end: closed.
    if (info->size < s.export_size) {
        spdlog::error("{}: handed over on export '{}' of {} bytes, which now has {}", tag(), s.export_name,
                      s.export_size, info->size);
        return close("export size changed");
    }
    if (s.unread.size() > read_buffer_size) {
        spdlog::error("{}: handed over with {} unread bytes, more than a read buffer", tag(), s.unread.size());
        return close("hand-over state too large");
    }
    negotiation_.structured_replies = s.structured;
    // base:allocation was selected for this export; it still holds as the export is the same.
    bind_export(*info, s.transmission_flags, s.block_status, group);
    limits_.size = s.export_size;
    if (limits_.read_only && (s.transmission_flags & nbd::tflag_read_only) == 0)
        spdlog::warn("{}: export '{}' is read-only now: its writes will fail with EPERM", tag(), s.export_name);
    if (s.unread.size() > small_read_size) {
        big_.reserve(read_buffer_size);
        rbuf_ = reinterpret_cast<std::uint8_t*>(big_.data());
        rcap_ = read_buffer_size;
        busy_ = true;
    }
    if (!s.unread.empty()) std::memcpy(rbuf_, s.unread.data(), s.unread.size());
    rbeg_ = 0;
    rend_ = s.unread.size();
    spdlog::info("{}: export '{}' on device {} (handed over, {} unread bytes)", tag(), s.export_name, device_->name(),
                 rend_);
    move_to_its_loop(&Connection::parse);
}

}   // namespace nbdsched::daemon
