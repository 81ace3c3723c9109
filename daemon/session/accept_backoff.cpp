#include "daemon/session/accept_backoff.hpp"

#include <algorithm>
#include <cerrno>
#include <spdlog/spdlog.h>

namespace nbdsched::daemon {

namespace {

// Errors that leave the connection in the backlog, or are about the
// listening socket itself, so that the next accept fails the same way at
// once: out of descriptors or memory; a security module refusing this
// socket's accepts (EACCES/EPERM: checked before a connection is taken off
// the queue); a socket that is no longer a listening one (EBADF, ENOTSOCK,
// EINVAL). Errors about one connection (ECONNABORTED, EPROTO, a network
// error passed on by TCP) are gone with it: accepting again at once is right.
bool repeats(const boost::system::error_code& ec) {
    if (ec.category() != boost::system::system_category()) return false;
    const int e = ec.value();
    return e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM || e == EACCES || e == EPERM || e == EBADF ||
           e == ENOTSOCK || e == EINVAL;
}

}   // namespace

AcceptBackoff::AcceptBackoff(boost::asio::io_context& io, std::string what) : timer_(io), what_(std::move(what)) {}

bool AcceptBackoff::wait_after(const boost::system::error_code& ec, std::function<void()> retry) {
    if (!repeats(ec)) return false;
    ++failures_;
    if (delay_.count() == 0) {
        delay_ = first_delay;
        since_ = std::chrono::steady_clock::now();
        spdlog::warn("{}: accept: {}: not accepting for {} ms, then again with back-off up to {} ms (no more "
                     "warnings until an accept succeeds)",
                     what_, ec.message(), delay_.count(), max_delay.count());
    } else {
        delay_ = std::min(delay_ * 2, max_delay);
    }
    timer_.expires_after(delay_);
    timer_.async_wait([this, generation = ++generation_, retry = std::move(retry)](const boost::system::error_code& e) {
        if (e || generation != generation_) return;   // cancelled: `this` may be gone when e is set
        retry();
    });
    return true;
}

void AcceptBackoff::accepted() {
    if (delay_.count() == 0) return;
    const auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - since_).count();
    spdlog::info("{}: accepting again after {} failed accept(s) in {} ms", what_, failures_, ms);
    delay_ = std::chrono::milliseconds{0};
    failures_ = 0;
}

void AcceptBackoff::cancel() {
    ++generation_;
    timer_.cancel();
}

}   // namespace nbdsched::daemon
