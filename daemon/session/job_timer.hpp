// A connection's timer for one job (a reply batch the client does not take,
// a WRITE payload it does not finish sending, the closing steps), made at
// its first use on the executor of the loop that owns the socket then: the
// socket moves to its own loop after the handshake, and a
// timer bound to another loop would run its handler there, racing the
// connection's own.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>

namespace nbdsched::daemon {

class JobTimer {
public:
    // The timer, made on `owner` the first time.
    boost::asio::steady_timer& on(const boost::asio::any_io_executor& owner);
    // Arms it for `after`. `fire` runs when it expires, unless cancel() or
    // another start() came first (a handler already on its way then does
    // nothing); `fire` must keep the timer's owner alive.
    void start(const boost::asio::any_io_executor& owner, std::chrono::steady_clock::duration after,
               std::function<void()> fire);
    void cancel();

private:
    std::optional<boost::asio::steady_timer> timer_;
    std::uint64_t round_ = 0;   // tells a late handler from the current job's
};

}   // namespace nbdsched::daemon
