// Drives a loop-driven asynchronous backend (io_uring, backend/
// async_backend.hpp) from its device's event loop: reaps when the backend's
// completion fd fires, and hands the requests a loop turn queued to the
// kernel at once, in one handler posted at the turn's first request (one
// io_uring_enter for a burst, not one per request).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <memory>

#include "backend/async_backend.hpp"
#include "daemon/device/async_completions.hpp"
#include "daemon/device/device_lock.hpp"
#include "daemon/device/handler_slot.hpp"

namespace nbdsched::daemon {

class LoopDriver {
public:
    // backend.completion_fd() must be >= 0; both must outlive this.
    // Its handlers hold `lock` (the device's) while they reap and submit.
    LoopDriver(boost::asio::io_context& io, backend::AsyncBackend& backend, AsyncCompletions& completions,
               DeviceLock& lock);
    ~LoopDriver();
    LoopDriver(const LoopDriver&) = delete;
    LoopDriver& operator=(const LoopDriver&) = delete;

    // False when the completion fd could not be watched (no descriptor
    // left to duplicate it): the device must not use the backend then.
    bool watching() const { return events_.is_open(); }
    // After a submit_* call (holding the device's lock): the turn's submit
    // is scheduled if it is not yet.
    void queued();

private:
    void watch();

    boost::asio::io_context& io_;
    backend::AsyncBackend& backend_;
    AsyncCompletions& completions_;
    DeviceLock& lock_;
    boost::asio::posix::stream_descriptor events_;   // a dup of completion_fd()
    std::uint64_t count_ = 0;                        // the eventfd's counter, read to re-arm it
    bool submit_posted_ = false;
    // The eventfd read's and the posted submit's Asio operations: one of
    // each is pending at a time, so neither allocates.
    DetachedSlot watch_slot_;
    DetachedSlot submit_slot_;
    std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);   // for posted submits that outlive this
};

}   // namespace nbdsched::daemon
