// limits.stall_timeout: a connection whose client has stopped taking its
// replies, or stopped sending a WRITE payload it began, holds buffers (and,
// until stall_copy_after, the device's pages) and its share of the device's
// in-flight budget for as long as it stays stalled. Past the timeout it is
// closed: nothing it was sent an answer for is lost, and the WRITE whose
// payload did not come whole was never answered, so dropping it is allowed.
// A client that stops half-way through a request header, or through the
// payload of a WRITE already answered with an error, holds less, but its
// connection is as stuck: it is closed after the same timeout. Over TLS
// the reading side is timed by the request's bytes as the TLS stream
// delivers them (a record at a time), not by the socket's.
#include <spdlog/spdlog.h>

#include "common/units.hpp"
#include "daemon/session/connection.hpp"

namespace nbdsched::daemon {

// parse() calls it when it waits for the rest of a request it began, after
// bytes came (or the connection was let go on), so the wait starts anew.
// Over TLS the bytes are those the stream has decrypted: a stall is timed
// from the last whole record that brought some of the request.
void Connection::watch_request_stall() {
    const auto timeout = context_.limits.stall_timeout;
    if (timeout.count() == 0) return;
    payload_wait_since_ = std::chrono::steady_clock::now();
    if (payload_watched_) return;   // its timer runs and reads the new start
    payload_watched_ = true;
    payload_checks_ = true;   // no stall step: nothing is pinned
    payload_timer_.start(socket_.get_executor(), timeout,
                         [self = shared_from_this()] { self->time_stall(StallSide::request); });
}

// A wait already under way when the timeout was 0 started no timer (a
// header, a small or refused payload), or its one check found 0 and
// stopped (an in-place payload, a reply batch): untimed, it would stay so
// until the client moved a byte. Timed from now, so that no client is
// closed by the reload itself. A wait already timed is checked again at
// once against the new value, from the start of its wait: its timer was
// armed for the old timeout, and a lower one would otherwise apply only
// when that ran out. The check runs on the connection's loop (a stall past
// the new timeout is closed there), not here, under exclusive().
void Connection::stall_timeout_changed() {
    if (closed_ || !in_transmission()) return;
    const auto check_now = [this](JobTimer& timer, StallSide side) {
        timer.start(socket_.get_executor(), {}, [self = shared_from_this(), side] { self->time_stall(side); });
    };
    if (stall_watched_ && stalled_) check_now(stall_timer_, StallSide::replies);
    if (payload_watched_ && payload_checks_)
        check_now(payload_timer_, rstate_ == ReadState::payload ? StallSide::payload : StallSide::request);
    if (context_.limits.stall_timeout.count() == 0) return;
    if (writing_ && !stall_watched_) watch_stall(true);
    if (!reading_ || payload_watched_) return;
    if (rstate_ == ReadState::payload && current_)
        watch_payload_stall(true);
    else if (rstate_ == ReadState::discard || (rstate_ == ReadState::header && rend_ > rbeg_))
        watch_request_stall();
}

// Runs once the stall timer's first step (stall_copy_after) is done, then
// at each check. The timeout is read at each check: a reload that changes
// it applies to stalls already timed too, and one that sets 0 ends them.
void Connection::time_stall(StallSide side) {
    const auto timeout = context_.limits.stall_timeout;
    if (timeout.count() == 0 || closed_ || !stalled_on(side)) {
        // The next wait starts the timer again (watch_stall,
        // watch_payload_stall, watch_request_stall): left set, a batch or
        // payload checked while the timeout was 0 would go untimed after a
        // reload set one, its next stall included. A batch's copy
        // (stalled_) stays until it leaves.
        if (side == StallSide::replies)
            stall_watched_ = false;
        else
            payload_watched_ = false;
        return;
    }
    const auto since = side == StallSide::replies ? reply_wait_since_ : payload_wait_since_;
    const auto waited = std::chrono::steady_clock::now() - since;
    if (waited >= timeout) return close_stalled(side, waited);
    auto& timer = side == StallSide::replies ? stall_timer_ : payload_timer_;
    if (side != StallSide::replies) payload_checks_ = true;
    timer.start(socket_.get_executor(), timeout - waited, [self = shared_from_this(), side] { self->time_stall(side); });
}

bool Connection::stalled_on(StallSide side) const {
    switch (side) {
    case StallSide::replies: return stall_watched_ && writing_;
    case StallSide::payload: return payload_watched_ && rstate_ == ReadState::payload && current_ != nullptr;
    case StallSide::request:
        return payload_watched_ && reading_ &&
               (rstate_ == ReadState::discard || (rstate_ == ReadState::header && rend_ > rbeg_));
    }
    return false;
}

void Connection::close_stalled(StallSide side, std::chrono::steady_clock::duration waited) {
    const std::string how_long = format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(waited)) +
                                 " (limits.stall_timeout " +
                                 format_duration(context_.limits.stall_timeout) + ")";
    if (side == StallSide::replies)
        return close("export '" + export_name_ + "': the client has not read its replies for " + how_long + ": " +
                         std::to_string(batch_.size() + pending_.size()) + " replies not (all) sent",
                     spdlog::level::warn);
    if (side == StallSide::request && rstate_ == ReadState::discard)
        return close("export '" + export_name_ + "': the client has not sent the rest of a refused WRITE's payload for " +
                         how_long + ": " + std::to_string(payload_got_) + " of " +
                         std::to_string(payload_got_ + payload_left_) + " bytes came (its error was answered)",
                     spdlog::level::warn);
    if (side == StallSide::request)
        return close("export '" + export_name_ + "': the client has not sent the rest of a request header for " +
                         how_long + ": " + std::to_string(rend_ - rbeg_) + " of " + std::to_string(nbd::request_size) +
                         " bytes came",
                     spdlog::level::warn);
    close("export '" + export_name_ + "': the client has not sent the rest of a WRITE payload for " + how_long +
              ": " + std::to_string(payload_got_) + " of " + std::to_string(current_->header.length) +
              " bytes came; that WRITE is dropped unanswered",
          spdlog::level::warn);
}

}   // namespace nbdsched::daemon
