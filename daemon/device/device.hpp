// A device loop: one per configured device. It owns the backend, the
// scheduler and the optional timing model, and drives the scheduler as its
// header asks: submit, drain dispatch(), complete, re-arm a timer at
// next_wakeup(). Everything runs on the event loop thread except the data
// operations of blocking backends, which run on a thread pool; an
// asynchronous backend (RBD, a file on io_uring) is handed the data
// operations on the loop, with no thread per request (what it does not take
// goes to the pool). Both kinds' completions come back through
// AsyncCompletions (one loop wake-up per burst). With a timing model, the
// data operation runs at dispatch and the reply is released by a timer at
// the model's completion time; the
// emulated delay never blocks the loop. With read-ahead on (read_ahead_kb),
// client requests pass through a ReadAheadPath first: cached reads are
// answered at once, and prefetches enter the scheduler as async reads of
// the reader's queue.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cstdint>
#include <memory>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "common/rate_limit.hpp"
#include "timing/capacity.hpp"
#include "timing/device_model.hpp"
#include "daemon/device/async_completions.hpp"
#include "daemon/device/device_lock.hpp"
#include "daemon/device/handler_slot.hpp"
#include "daemon/device/inflight_budget.hpp"
#include "daemon/device/io_limits.hpp"
#include "daemon/device/io_request.hpp"
#include "daemon/device/loop_driver.hpp"
#include "daemon/device/readahead_path.hpp"
#include "daemon/device/steady_clock.hpp"
#include "daemon/stats/counters.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::daemon {

class Device {
public:
    struct Parts {
        std::string name;
        std::unique_ptr<backend::Backend> backend;
        std::unique_ptr<sched::Scheduler> scheduler;
        std::unique_ptr<timing::DeviceModel> model;   // nullptr: no emulated timing
        timing::Capacity capacity;                    // from the timing profile; zeros: unknown
        bool rotational = false;
        bool writes_sync = true;                            // plain writes count as sync
        IoLimits io_limits;                                 // what the device presents (model or storage)
        readahead::Options read_ahead{.window_bytes = 0};   // 0: read-ahead off (setup.cpp sets it)
        // limits.max_inflight_per_device / max_inflight_bytes_per_device
        std::uint64_t max_inflight = UINT64_MAX;
        std::uint64_t max_inflight_bytes = UINT64_MAX;
        bool inflight_fair_share = true;   // limits.inflight_fair_share
    };

    // `pool` runs blocking backends; it may be null when the backend is not
    // blocking. The pool must be joined before a device is destroyed.
    Device(boost::asio::io_context& io, boost::asio::thread_pool* pool, Parts parts);
    ~Device();
    Device(const Device&) = delete;
    Device& operator=(const Device&) = delete;

    const std::string& name() const { return name_; }
    // The device's home loop: its timers and its backend's completions run
    // there, and its connections' transmission phase unless placed on
    // another loop (then the device is shared: hold()).
    boost::asio::io_context& io() { return io_; }
    // Held while touching the device from a connection's loop (its in-flight
    // budget; submit() and the other entry points take it themselves).
    // Takes nothing until share_across_loops().
    DeviceLock::Hold hold() { return lock_.hold(); }
    // A connection of this device runs on another loop than io() from now
    // on. Under EventLoops::exclusive() only.
    void share_across_loops() { lock_.share(); }
    std::uint64_t size() const { return backend_->size(); }
    bool rotational() const { return rotational_; }
    // Where data requests run: "io_uring" (a loop-driven ring), "async" (the
    // backend's own threads: RBD), "threads" (the pool), "loop" (RAM).
    std::string_view io_engine() const {
        if (async_) return driver_ ? "io_uring" : "async";
        return blocking_ ? "threads" : "loop";
    }
    backend::Backend& backend() { return *backend_; }
    sched::Scheduler& scheduler() { return *scheduler_; }
    const timing::DeviceModel* model() const { return model_.get(); }
    const timing::Capacity& capacity() const { return capacity_; }
    const IoLimits& io_limits() const { return io_limits_; }
    // Read-ahead counters and gauges (hits, misses, bytes prefetched/cached);
    // nullopt when read-ahead is off for this device.
    std::optional<readahead::Stats> read_ahead_stats() const;
    // The backend's size changed (refresh_size on reload): read-ahead drops
    // what it read before and follows the new size.
    void size_changed();

    sched::QueueId open_queue(sched::GroupId group);
    void close_queue(sched::QueueId queue);
    // The group a queue was opened in (its connection's share of the in-flight budget).
    sched::GroupId group_of(sched::QueueId queue) const;

    // Takes a filled request (op, offset, length, queue, group, sink, home);
    // the device answers through request.sink->request_done(request) on the
    // request's home loop -- possibly from inside submit() when the backend
    // is not blocking, so a sink must not re-enter submit() from
    // request_done(); posted there when another loop finishes it.
    void submit(IoRequest& request);

    // A client WRITE's payload received straight into the backend's memory
    // (RAM): its destination [offset, offset+length) as spans into
    // r.targets, pinned (r.pinned set; r.pinned->unpin_written(r.pin,
    // r.offset, r.length) when the payload is in or given up on: zeros
    // received over a hole go back to being one), and r.in_place set, so
    // that dispatch copies nothing. false (nothing
    // pinned): the payload goes to r.buffer and is written at dispatch, as
    // for any backend that does not offer it, with read-ahead on (its cache
    // is invalidated as a write is submitted), or when memory runs out.
    bool pin_write(IoRequest& r, std::uint64_t offset, std::uint64_t length);
    // A client WRITE whose payload the connection already holds whole (in
    // its read buffer), on a backend that keeps its data in its own memory
    // (Backend::writes_to_memory: RAM): written now, and r.in_place set as
    // by pin_write(), but nothing pinned. false (read-ahead on, another
    // backend, or the write failed: out of memory): the buffer path.
    bool write_arrived(IoRequest& r, std::uint64_t offset, std::span<const std::byte> data);

    // NBD_CMD_BLOCK_STATUS and NBD_CMD_CACHE: metadata and hints, answered
    // beside the scheduler (docs/block-status.md says why), through
    // request.sink like submit(). BLOCK_STATUS needs r.buffer reserved for
    // max_block_status_extents descriptors (one with REQ_ONE).
    void submit_metadata(IoRequest& request);
    static constexpr std::size_t max_block_status_extents = 4096;

    std::size_t outstanding() const { return outstanding_; }   // submitted, not done
    // What its connections may hold read but unanswered (charged by them).
    InflightBudget& inflight_budget() { return budget_; }
    const InflightBudget& inflight_budget() const { return budget_; }

    // Request counters (ctl stats, metrics); queues are registered by the server.
    stats::DeviceStats& stats() { return stats_; }
    const stats::DeviceStats& stats() const { return stats_; }
    // Re-runs dispatch after a tunable or weight change (an idle wait may end)
    // and hands the scheduler's group weights to the in-flight budget.
    void kick();

    // Synchronous flush, for shutdown (0 or errno).
    int flush_now() { return backend_->flush(); }

private:
    struct Release {
        sched::Time at;
        IoRequest* request;
        bool operator>(const Release& o) const { return at > o.at; }
    };

    // `now`: the caller's reading of the clock (steady_now()), one per step of a request.
    void enqueue(IoRequest& r, sched::Time now);
    void answer(IoRequest& r, sched::Time now);
    // r.sink->request_done(r) on r.home's thread: at once when that is this
    // one (or the device is not shared), else posted there.
    void tell(IoRequest& r);
    void pump();   // at steady_now()
    void pump(sched::Time now);
    void start(IoRequest& r, sched::Time now);
    bool pin_read(IoRequest& r);
    // Below this a copy costs less than the pin and the reply's extra iovecs.
    static constexpr std::uint64_t min_pinned_read = 64u << 10;
    static int run_backend(backend::Backend& b, IoRequest& r);
    bool async_takes(IoRequest& r);
    void start_async(IoRequest& r);
    static int run_metadata(backend::Backend& b, IoRequest& r);   // metadata_ops.cpp
    void data_done(IoRequest& r);
    void finish(IoRequest& r);
    void arm_wakeup();
    void arm_release();
    void on_release_timer();
    sched::RequestId alloc_slot(IoRequest& r);
    void sync_weights();

    boost::asio::io_context& io_;
    boost::asio::thread_pool* pool_;
    DeviceLock lock_;
    std::string name_;
    // Before backend_: destroyed after it, as the backend's last completions arrive.
    std::unique_ptr<AsyncCompletions> completions_;
    std::unique_ptr<backend::Backend> backend_;
    std::unique_ptr<sched::Scheduler> scheduler_;
    std::unique_ptr<timing::DeviceModel> model_;
    timing::Capacity capacity_;
    bool rotational_;
    bool writes_sync_;
    bool blocking_;
    backend::AsyncBackend* async_ = nullptr;   // backend_->async(): data requests go there
    std::unique_ptr<LoopDriver> driver_;       // async_ is loop-driven (io_uring); before backend_ goes
    IoLimits io_limits_;
    InflightBudget budget_;
    std::unordered_map<sched::QueueId, sched::GroupId> queue_groups_;

    // Request ids index slots_, so finding a dispatched request costs no
    // hashing and no allocation once the table has grown.
    std::vector<IoRequest*> slots_;
    std::vector<sched::RequestId> free_slots_;
    std::size_t outstanding_ = 0;
    sched::QueueId next_queue_ = 1;

    bool pumping_ = false;
    sched::Time pump_now_{};   // the time pump() dispatches at: the latest reading of the calls it is inside
    boost::asio::steady_timer wakeup_timer_;
    std::optional<sched::Time> wakeup_armed_;   // when the timer fires; only moved earlier
    boost::asio::steady_timer release_timer_;
    std::optional<sched::Time> release_armed_;
    // The timers' waits: one each per request under a limit or a timing
    // profile, so each keeps its memory (a re-arm while the cancelled wait is
    // still queued allocates). Detached: a removed device's cancelled wait
    // may still sit in its loop's queue.
    DetachedSlot wakeup_slot_, release_slot_;
    std::priority_queue<Release, std::vector<Release>, std::greater<>> releases_;
    std::unique_ptr<ReadAheadPath> read_ahead_;   // null: off (declared last: its requests go first)
    stats::DeviceStats stats_;
    RateLimit failure_log_{std::chrono::seconds(5), 10};   // failed requests logged (all counted in stats_)
};

}   // namespace nbdsched::daemon
