// Completions of an asynchronous backend (backend/async_backend.hpp), moved
// from the backend's threads onto the device's event loop. A completion
// lands in a locked list; only the first one into an empty list posts a
// drain, so a burst of completions costs one wake-up of the loop, not one
// each (docs/rbd.md has the measurement). A loop-driven backend (io_uring)
// reports on the loop itself: delivered at once, no list, no lock.
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/async_backend.hpp"
#include "daemon/device/handler_slot.hpp"
#include "daemon/device/io_request.hpp"

namespace nbdsched::daemon {

class AsyncCompletions final : public backend::CompletionSink {
public:
    // `deliver` runs on the event loop with each request and its errno.
    using Deliver = std::function<void(IoRequest&, int)>;
    AsyncCompletions(boost::asio::io_context& io, Deliver deliver);
    // Completions still posted then are dropped: destroy this after the
    // backend (whose destruction waits for its requests).
    ~AsyncCompletions();
    AsyncCompletions(const AsyncCompletions&) = delete;
    AsyncCompletions& operator=(const AsyncCompletions&) = delete;

    void completed(void* tag, int error) override;   // any thread
    void completed_on_loop(void* tag, int error) override;

    // A loop-driven backend's wake-up, counted as a drain.
    void loop_wakeup() { ++wakeups_; }
    // Event loop only: drains run, and the completions they delivered.
    std::uint64_t wakeups() const { return wakeups_; }
    std::uint64_t delivered() const { return delivered_; }

private:
    struct Shared {
        std::mutex mutex;
        std::vector<std::pair<IoRequest*, int>> ready;
        bool posted = false;
        bool alive = true;
    };
    void drain();

    boost::asio::io_context& io_;
    Deliver deliver_;
    std::shared_ptr<Shared> shared_ = std::make_shared<Shared>();
    // The posted drain's operation: one is pending at a time (`posted`).
    // Taken on a backend thread, given back on the loop before the drain
    // runs, so the next completion finds it free.
    DetachedSlot drain_slot_;
    std::vector<std::pair<IoRequest*, int>> batch_;   // event loop only: swapped with ready
    std::uint64_t wakeups_ = 0;
    std::uint64_t delivered_ = 0;
};

}   // namespace nbdsched::daemon
