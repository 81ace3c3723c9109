#include "daemon/device/loop_driver.hpp"

#include <boost/asio/buffer.hpp>
#include <boost/asio/post.hpp>
#include <fcntl.h>

namespace nbdsched::daemon {

LoopDriver::LoopDriver(boost::asio::io_context& io, backend::AsyncBackend& backend, AsyncCompletions& completions,
                       DeviceLock& lock)
    : io_(io), backend_(backend), completions_(completions), lock_(lock), events_(io) {
    const int fd = ::fcntl(backend.completion_fd(), F_DUPFD_CLOEXEC, 0);
    if (fd < 0) return;   // out of descriptors: watching() is false
    events_.assign(fd);
    watch();
}

LoopDriver::~LoopDriver() { *alive_ = false; }

// What the completions let start is submitted by the posted handler, as any
// other submission: the replies of a reap (the writer's later batches are
// posted too) do not wait for an io_uring_enter.
// A read, not async_wait: Asio registers descriptors edge-triggered, and a
// wait armed after the edge would sleep through it; a read tries first.
void LoopDriver::watch() {
    events_.async_read_some(boost::asio::buffer(&count_, sizeof count_),
                            in_slot(*watch_slot_, [this, alive = alive_](const boost::system::error_code& ec,
                                                                         std::size_t) {
                                if (!*alive || ec == boost::asio::error::operation_aborted) return;
                                auto held = lock_.hold();
                                completions_.loop_wakeup();
                                backend_.reap(ec ? 0 : count_);
                                queued();   // the rest of a short transfer, if any
                                if (!ec) watch();
                            }));
}

void LoopDriver::queued() {
    if (submit_posted_ || !backend_.pending()) return;
    submit_posted_ = true;
    // From another loop's connection (a shared device) this runs there,
    // holding the device: the slot's block was given back before the last
    // submit handler took the device and cleared submit_posted_.
    boost::asio::post(io_, in_slot(*submit_slot_, [this, alive = alive_] {
                          if (!*alive) return;
                          auto held = lock_.hold();
                          submit_posted_ = false;
                          backend_.submit_pending();
                          queued();   // the kernel refused some for now (EAGAIN, ENOMEM): next turn
                      }));
}

}   // namespace nbdsched::daemon
