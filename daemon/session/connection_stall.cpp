// limits.stall_timeout: a connection whose client has stopped taking its
// replies, or stopped sending a WRITE payload it began, holds buffers (and,
// until stall_copy_after, the device's pages) and its share of the device's
// in-flight budget for as long as it stays stalled. Past the timeout it is
// closed: nothing it was sent an answer for is lost, and the WRITE whose
// payload did not come whole was never answered, so dropping it is allowed.
#include <spdlog/spdlog.h>

#include "common/units.hpp"
#include "daemon/session/connection.hpp"

namespace nbdsched::daemon {

// Runs once the stall timer's first step (stall_copy_after) is done, then
// at each check. The timeout is read at each check: a reload that changes
// it applies to stalls already timed too, and one that sets 0 ends them.
void Connection::time_stall(StallSide side) {
    const auto timeout = context_.limits.stall_timeout;
    if (timeout.count() == 0 || closed_ || !stalled_on(side)) return;
    const auto since = side == StallSide::replies ? reply_wait_since_ : payload_wait_since_;
    const auto waited = std::chrono::steady_clock::now() - since;
    if (waited >= timeout) return close_stalled(side, waited);
    auto& timer = side == StallSide::replies ? stall_timer_ : payload_timer_;
    timer.start(socket_.get_executor(), timeout - waited, [self = shared_from_this(), side] { self->time_stall(side); });
}

bool Connection::stalled_on(StallSide side) const {
    if (side == StallSide::replies) return stall_watched_ && writing_;
    return payload_watched_ && rstate_ == ReadState::payload && current_ != nullptr;
}

void Connection::close_stalled(StallSide side, std::chrono::steady_clock::duration waited) {
    const std::string how_long = format_duration(std::chrono::duration_cast<std::chrono::milliseconds>(waited)) +
                                 " (limits.stall_timeout " +
                                 format_duration(context_.limits.stall_timeout) + ")";
    if (side == StallSide::replies)
        return close("export '" + export_name_ + "': the client has not read its replies for " + how_long + ": " +
                         std::to_string(batch_.size() + pending_.size()) + " replies not (all) sent",
                     spdlog::level::warn);
    close("export '" + export_name_ + "': the client has not sent the rest of a WRITE payload for " + how_long +
              ": " + std::to_string(payload_got_) + " of " + std::to_string(current_->header.length) +
              " bytes came; that WRITE is dropped unanswered",
          spdlog::level::warn);
}

}   // namespace nbdsched::daemon
