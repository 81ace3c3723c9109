#include "daemon/process/idle_memory.hpp"

#include "daemon/device/buffer_pool.hpp"
#include "daemon/process/heap_tuning.hpp"

namespace nbdsched::daemon {

IdleMemoryRelease::IdleMemoryRelease(boost::asio::io_context& io, std::chrono::milliseconds period)
    : timer_(io), period_(period) {}

void IdleMemoryRelease::start() {
    timer_.expires_after(period_);
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        check();
        start();
    });
}

void IdleMemoryRelease::stop() {
    timer_.cancel();
}

void IdleMemoryRelease::check() {
    // The timer runs on the loop's thread, whose pool its connections and
    // devices use.
    auto peak = buffer_pool::peak_in_use_here();
    auto freed = buffer_pool::release_kept_here(peak);
    if (freed > 0 || peak < last_peak_ / 2) return_free_memory();
    last_peak_ = peak;
}

}   // namespace nbdsched::daemon
