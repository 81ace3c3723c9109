#include "daemon/device/device.hpp"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <chrono>
#include <spdlog/spdlog.h>
#include <system_error>

#include "daemon/stats/loop_activity.hpp"

namespace nbdsched::daemon {

namespace {

std::chrono::steady_clock::time_point to_clock(sched::Time t) {
    return std::chrono::steady_clock::time_point(std::chrono::duration_cast<std::chrono::steady_clock::duration>(t));
}

InflightBudget::Options budget_options(const Device::Parts& parts) {
    InflightBudget::Options o;
    o.max_requests = parts.max_inflight;
    o.max_bytes = parts.max_inflight_bytes;
    o.fair_share = parts.inflight_fair_share;
    return o;
}

backend::AsyncOp async_op(sched::Op op) {
    switch (op) {
    case sched::Op::read: return backend::AsyncOp::read;
    case sched::Op::write: return backend::AsyncOp::write;
    case sched::Op::flush: return backend::AsyncOp::flush;
    case sched::Op::trim: return backend::AsyncOp::trim;
    case sched::Op::write_zeroes: return backend::AsyncOp::write_zeroes;
    }
    return backend::AsyncOp::read;
}

}   // namespace

Device::Device(boost::asio::io_context& io, boost::asio::thread_pool* pool, Parts parts)
    : io_(io),
      pool_(pool),
      name_(std::move(parts.name)),
      backend_(std::move(parts.backend)),
      scheduler_(std::move(parts.scheduler)),
      model_(std::move(parts.model)),
      capacity_(parts.capacity),
      rotational_(parts.rotational),
      writes_sync_(parts.writes_sync),
      blocking_(backend_->blocking() && pool != nullptr),
      io_limits_(parts.io_limits),
      budget_(budget_options(parts)),
      wakeup_timer_(io),
      release_timer_(io) {
    sync_weights();   // the groups' weights were set on the scheduler before it came here
    // The thread pool's completions come back the same way: a burst of them
    // wakes the loop once, not once each.
    if ((async_ = backend_->async()) || blocking_) {
        completions_ = std::make_unique<AsyncCompletions>(io, [this](IoRequest& r, int error) {
            auto held = lock_.hold();
            r.backend_errno = error;
            data_done(r);
        });
        if (async_) async_->set_sink(completions_.get());
        if (async_ && async_->completion_fd() >= 0)
            driver_ = std::make_unique<LoopDriver>(io, *async_, *completions_, lock_);
        if (driver_ && !driver_->watching()) {
            spdlog::warn("device {}: no descriptor left to watch its io_uring completions: using the I/O threads",
                         name_);
            driver_.reset();
            async_ = nullptr;
        }
    }
    if (parts.read_ahead.window_bytes == 0) return;
    read_ahead_ = std::make_unique<ReadAheadPath>(
        parts.read_ahead, ReadAheadPath::Hooks{[this](IoRequest& r) { enqueue(r, steady_now()); },
                                               [this](IoRequest& r) {
                                                   stats_.readahead_hit(r.queue);
                                                   answer(r, steady_now());
                                               }});
}

Device::~Device() {
    if (completions_ && completions_->wakeups()) {
        spdlog::info("device {}: {} asynchronous completions in {} event-loop wake-ups", name_,
                     completions_->delivered(), completions_->wakeups());
    }
    if (auto s = read_ahead_stats()) {
        spdlog::info("device {}: read-ahead window {} KiB: {} hits, {} waits, {} misses, {} prefetches "
                     "({} KiB, {} dropped, {} skipped), {} KiB evicted, {} KiB invalidated",
                     name_, s->window_bytes >> 10, s->hits, s->waits, s->misses, s->prefetches,
                     s->bytes_prefetched >> 10, s->prefetches_dropped, s->prefetches_skipped,
                     s->bytes_evicted >> 10, s->bytes_invalidated >> 10);
    }
}

std::optional<readahead::Stats> Device::read_ahead_stats() const {
    if (!read_ahead_) return std::nullopt;
    return read_ahead_->stats();
}

void Device::size_changed() {
    auto held = lock_.hold();
    if (read_ahead_) read_ahead_->resize(size());
}

sched::QueueId Device::open_queue(sched::GroupId group) {
    auto held = lock_.hold();
    auto q = next_queue_++;
    scheduler_->open_queue(q, group, steady_now());
    queue_groups_[q] = group;
    sync_weights();   // a group the scheduler met just now weighs its default
    return q;
}

sched::GroupId Device::group_of(sched::QueueId queue) const {
    auto it = queue_groups_.find(queue);
    return it == queue_groups_.end() ? 0 : it->second;
}

// Weights change through scheduler().set_group(), always followed by kick();
// the scheduler's stats are the one place that has them all.
void Device::sync_weights() {
    for (const auto& [group, stats] : scheduler_->stats(steady_now()).groups) budget_.set_weight(group, stats.weight);
}

void Device::kick() {
    auto held = lock_.hold();
    sync_weights();
    pump();
}

void Device::close_queue(sched::QueueId queue) {
    auto held = lock_.hold();
    queue_groups_.erase(queue);
    scheduler_->close_queue(queue, steady_now());
    if (read_ahead_) read_ahead_->on_queue_closed(queue);
    stats_.close_queue(queue);
    pump();   // closing may end an idle wait on that queue
}

[[gnu::hot]] sched::RequestId Device::alloc_slot(IoRequest& r) {
    if (free_slots_.empty()) {
        slots_.push_back(&r);
        return slots_.size() - 1;
    }
    auto id = free_slots_.back();
    free_slots_.pop_back();
    slots_[id] = &r;
    return id;
}

[[gnu::hot]] void Device::submit(IoRequest& r) {
    auto& activity = stats::loop_activity();
    ++activity.requests;
    if (model_) ++activity.timed_requests;
    auto held = lock_.hold();
    // A timed device charges a zero as a write of zeros: never fast.
    if (r.fast_zero && model_) {
        r.backend_errno = ENOTSUP;
        return tell(r);
    }
    ++outstanding_;
    r.backend_errno = 0;
    const auto now = steady_now();   // one reading for the statistics and the scheduler
    r.submitted_at = now;
    stats_.submitted(r.queue);
    // Read-ahead may answer a read from its cache or park it on a prefetch.
    if (read_ahead_ && read_ahead_->intercept(r)) return;
    enqueue(r, now);
}

// Into the scheduler. Every read is sync, read-ahead's prefetches too, as
// the kernel's op_is_sync() has it: as async requests, prefetches left a
// sequential reader's queue empty and CFQ gave the device to a writer's
// sync queue (2% : 100%). A prefetch is charged to the reader's queue and
// group, but no client waits for it: not in outstanding().
[[gnu::hot]] void Device::enqueue(IoRequest& r, sched::Time now) {
    r.id = alloc_slot(r);
    r.backend_errno = 0;
    sched::Request s;
    s.id = r.id;
    s.queue = r.queue;
    s.group = r.group;
    s.op = r.op;
    s.offset = r.offset;
    s.length = r.length;
    s.fua = r.fua;
    s.sync = r.op == sched::Op::read || r.op == sched::Op::flush || r.fua || writes_sync_;
    s.arrival = now;
    scheduler_->submit(s, now);
    pump(now);
}

[[gnu::hot]] void Device::pump() { pump(steady_now()); }

// Drains dispatch(). Inline completions call back into pump() (through
// finish) from inside start(), and dispatch() is asked again after every
// start(): a call from inside only brings its reading of the clock, so that
// what it made dispatchable is dispatched at that time. (A second round of
// this loop with a reading of its own cost a clock read per request, and
// the same one dispatch() that finds nothing.)
[[gnu::hot]] void Device::pump(sched::Time now) {
    if (pumping_) {
        pump_now_ = std::max(pump_now_, now);
        return;
    }
    pumping_ = true;
    pump_now_ = now;
    while (auto d = scheduler_->dispatch(pump_now_)) start(*slots_[d->id], pump_now_);
    pumping_ = false;
    arm_wakeup();
}

[[gnu::hot]] int Device::run_backend(backend::Backend& b, IoRequest& r) {
    switch (r.op) {
    case sched::Op::read: return b.read(r.offset, r.buffer.span(r.length));
    case sched::Op::write: return b.write(r.offset, r.buffer.span(r.length), r.fua);
    case sched::Op::flush: return b.flush();
    case sched::Op::trim: return b.trim(r.offset, r.length, r.fua);
    case sched::Op::write_zeroes:
        if (r.fast_zero) return b.write_zeroes_fast(r.offset, r.length, r.may_trim, r.fua);
        return b.write_zeroes(r.offset, r.length, r.may_trim, r.fua);
    }
    return EINVAL;
}

[[gnu::hot]] void Device::start(IoRequest& r, sched::Time now) {
    r.release_at = now;
    if (r.abandoned && r.op == sched::Op::read) {   // its client is gone: nothing to read it for
        r.backend_errno = ESHUTDOWN;
        return data_done(r);
    }
    if (model_) r.release_at = model_->submit({r.op, r.offset, r.length}, now);
    if (r.in_place && r.op == sched::Op::write) {   // the data went in as it arrived (pin_write): only the reply is left
        r.backend_errno = 0;
        return data_done(r);
    }
    // A read the page cache holds is answered here, on either engine: the
    // ring would take longer to say so (its completion comes back through
    // the eventfd and another loop turn).
    if (blocking_ && r.op == sched::Op::read) {
        if (auto cached = backend_->read_if_cached(r.offset, r.buffer.span(r.length))) {
            r.backend_errno = *cached;
            data_done(r);
            return;
        }
    }
    if (async_takes(r)) return start_async(r);
    if (!blocking_) {
        if (pin_read(r)) return data_done(r);
        r.backend_errno = run_backend(*backend_, r);
        data_done(r);
        return;
    }
    if (!r.pool_slot) r.pool_slot.emplace();
    boost::asio::post(*pool_,
                      in_slot(**r.pool_slot, [this, &r] { completions_->completed(&r, run_backend(*backend_, r)); }));
}

// A fast zero asks the synchronous call; the backend may leave others to
// the pool too (io_uring: fallocate, unaligned O_DIRECT).
[[gnu::hot]] bool Device::async_takes(IoRequest& r) {
    if (!async_ || r.fast_zero) return false;
    const bool data = r.op == sched::Op::read || r.op == sched::Op::write;
    return async_->takes(async_op(r.op), r.offset, r.length, data ? r.buffer.data() : nullptr);
}

void Device::start_async(IoRequest& r) {
    switch (r.op) {
    case sched::Op::read: async_->submit_read(r.offset, r.buffer.span(r.length), &r); break;
    case sched::Op::write: async_->submit_write(r.offset, r.buffer.span(r.length), r.fua, &r); break;
    case sched::Op::flush: async_->submit_flush(&r); break;
    case sched::Op::trim: async_->submit_trim(r.offset, r.length, r.fua, &r); break;
    case sched::Op::write_zeroes: async_->submit_write_zeroes(r.offset, r.length, r.may_trim, r.fua, &r); break;
    }
    if (driver_) driver_->queued();
}

// A large READ of a RAM device without timing or read-ahead goes to the
// socket from the backend's memory: one copy (into the socket) instead of
// two. With a timing model the data must be the data at dispatch, and
// read-ahead's requests keep their own buffers.
[[gnu::hot]] bool Device::pin_read(IoRequest& r) {
    if (!r.may_pin || r.op != sched::Op::read || r.length < min_pinned_read || model_ || read_ahead_) return false;
    r.pieces.clear();
    const auto pin = backend_->read_pinned(r.offset, r.length, r.pieces);
    if (!pin) return false;
    r.pinned = backend_.get();
    r.pin = *pin;
    r.backend_errno = 0;
    return true;
}

// NBD lets the payload land before the scheduler dispatches the write: "The
// server MAY process commands out of order, and MAY reply out of order"
// (doc/proto.md, "Ordering of messages and writes"), except for FLUSH and
// FUA, which only govern replies: a request in flight beside this write may
// see its data or not, and everything sent after its reply sees it.
// Read-ahead keeps the buffer path: its cache is invalidated as a write is
// submitted, and prefetches reading a payload half received would cache it.
bool Device::pin_write(IoRequest& r, std::uint64_t offset, std::uint64_t length) {
    r.in_place = false;
    if (read_ahead_) return false;
    r.targets.clear();
    const auto pin = backend_->write_pinned(offset, length, r.targets);
    if (!pin) return false;
    r.pinned = backend_.get();
    r.pin = *pin;
    r.in_place = true;
    r.offset = offset;   // what unpin_written() settles, should the connection close before submit()
    r.length = length;
    return true;
}

// As pin_write(), for a payload that is all here: the one copy is
// write()'s, which holds the pages while it copies, so no pin is needed (a
// pin and its end took a mutex each, and the end settled the fresh pages:
// the 4 KiB WRITE at iodepth 64 paid that on every request). Zeros over a
// hole stay a hole: write() allocates only for data.
[[gnu::hot]] bool Device::write_arrived(IoRequest& r, std::uint64_t offset, std::span<const std::byte> data) {
    r.in_place = false;
    if (read_ahead_ || !backend_->writes_to_memory()) return false;
    if (backend_->write(offset, data, false) != 0) return false;
    r.in_place = true;
    r.offset = offset;
    r.length = data.size();
    return true;
}

[[gnu::hot]] void Device::data_done(IoRequest& r) {
    // A refused fast zero is an answer the client asked for, not a failure;
    // nor is a READ dropped for a client that closed (start()).
    std::uint64_t held_back = 0;
    const bool asked = (r.fast_zero && r.backend_errno == ENOTSUP) || (r.abandoned && r.backend_errno == ESHUTDOWN);
    if (r.backend_errno != 0 && !asked && failure_log_.allow(steady_now(), held_back)) {
        if (held_back != 0)
            spdlog::warn("device {}: {} more failed request(s) not logged (at most {} lines per {} ms)", name_,
                         held_back, failure_log_.burst(),
                         std::chrono::duration_cast<std::chrono::milliseconds>(failure_log_.interval()).count());
        const auto why = std::system_category().message(r.backend_errno);
        if (r.op == sched::Op::flush)   // a flush has no range: "offset 0 length 0" read as a failed write there
            spdlog::warn("device {}: FLUSH failed: {}", name_, why);
        else
            spdlog::warn("device {}: {} offset {} length {} failed: {}", name_, sched::to_string(r.op), r.offset,
                         r.length, why);
    }
    if (model_ && r.release_at > steady_now()) {
        releases_.push({r.release_at, &r});
        arm_release();
        return;
    }
    finish(r);
}

[[gnu::hot]] void Device::finish(IoRequest& r) {
    const auto now = steady_now();   // one reading for the scheduler and the statistics
    scheduler_->complete(r.id, now);
    free_slots_.push_back(r.id);
    slots_[r.id] = nullptr;
    if (read_ahead_ && read_ahead_->on_finished(r))
        tell(r);   // a prefetch: its data goes to the read-ahead cache (home: none)
    else
        answer(r, now);
    pump(now);
}

// A client request is done: through the device, or from read-ahead.
// A READ dropped for a client that closed counts as cancelled, neither as a
// read nor as an error.
[[gnu::hot]] void Device::answer(IoRequest& r, sched::Time now) {
    if (r.abandoned && r.backend_errno == ESHUTDOWN)
        stats_.cancelled(r.queue);
    else
        stats_.done(r.queue, r.op, r.length, now - r.submitted_at, r.backend_errno != 0);
    --outstanding_;
    tell(r);
}

// A request whose connection runs on another loop is answered there: its
// reply queue is that loop's. Not shared, everything runs on io_ (or under
// exclusive(), every other loop paused), as before the device was shared.
[[gnu::hot]] void Device::tell(IoRequest& r) {
    if (r.home == nullptr || (!lock_.shared() && r.home == &io_) || r.home->get_executor().running_in_this_thread())
        return r.sink->request_done(r);
    boost::asio::post(*r.home, [&r] { r.sink->request_done(r); });
}

// The timer is only ever moved earlier. cfq arms its idle timer at nearly
// every completion and cancels it at the next arrival, so following
// next_wakeup() exactly cost one timerfd_settime per request -- most of
// cfq's CPU over `none` on RAM (bench exp7). A wakeup that comes too early,
// or for an idle wait since cancelled, is harmless: pump() dispatches only
// what is due and arms the timer for the real next wakeup.
[[gnu::hot]] void Device::arm_wakeup() {
    auto next = scheduler_->next_wakeup();
    if (!next || (wakeup_armed_ && *wakeup_armed_ <= *next)) return;
    wakeup_armed_ = next;
    wakeup_timer_.expires_at(to_clock(*next));
    wakeup_timer_.async_wait(in_slot(*wakeup_slot_, [this](const boost::system::error_code& ec) {
        if (ec) return;   // cancelled or re-armed
        auto held = lock_.hold();
        wakeup_armed_.reset();
        pump();
    }));
}

void Device::arm_release() {
    auto next = releases_.top().at;
    if (release_armed_ && *release_armed_ <= next) return;
    release_armed_ = next;
    release_timer_.expires_at(to_clock(next));
    release_timer_.async_wait(in_slot(*release_slot_, [this](const boost::system::error_code& ec) {
        if (ec) return;
        auto held = lock_.hold();
        release_armed_.reset();
        on_release_timer();
    }));
}

void Device::on_release_timer() {
    auto now = steady_now();
    while (!releases_.empty() && releases_.top().at <= now) {
        IoRequest& r = *releases_.top().request;
        releases_.pop();
        finish(r);
    }
    if (!releases_.empty()) arm_release();
}

}   // namespace nbdsched::daemon
