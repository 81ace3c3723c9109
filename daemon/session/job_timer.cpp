#include "daemon/session/job_timer.hpp"

#include <utility>

namespace nbdsched::daemon {

boost::asio::steady_timer& JobTimer::on(const boost::asio::any_io_executor& owner) {
    if (!timer_) timer_.emplace(owner);
    return *timer_;
}

void JobTimer::start(const boost::asio::any_io_executor& owner, std::chrono::steady_clock::duration after,
                     std::function<void()> fire) {
    auto& timer = on(owner);
    timer.expires_after(after);
    timer.async_wait([this, round = ++round_, fire = std::move(fire)](const boost::system::error_code& ec) {
        if (!ec && round == round_) fire();
    });
}

void JobTimer::cancel() {
    ++round_;
    if (timer_) timer_->cancel();
}

}   // namespace nbdsched::daemon
