#include "daemon/device/readahead_path.hpp"

#include <cerrno>
#include <spdlog/spdlog.h>

namespace nbdsched::daemon {

namespace {
bool mutates(sched::Op op) {
    return op == sched::Op::write || op == sched::Op::trim || op == sched::Op::write_zeroes;
}
}   // namespace

ReadAheadPath::ReadAheadPath(const readahead::Options& options, Hooks hooks)
    : ra_(options), hooks_(std::move(hooks)) {}

// Requests still at the device when it goes away are never completed; the
// device (and with it this path and the cache) is gone too. The device logs
// the main counters; these say how reads covered by several prefetches or
// partly covered fared (seed 004's 1 MiB case hinges on them).
ReadAheadPath::~ReadAheadPath() {
    const auto s = ra_.stats();
    if (s.waits != 0)
        spdlog::info("read-ahead: {} waits, {} of them with a fill ({} KiB), {} went to the device after all",
                     s.waits, s.fills, s.bytes_filled >> 10, s.waits_failed);
}

bool ReadAheadPath::intercept(IoRequest& r) {
    if (mutates(r.op)) {
        ra_.on_write(r.offset, r.length);
        return false;
    }
    if (r.op != sched::Op::read) return false;
    // r may be answered (and recycled by its connection) inside schedule().
    const sched::GroupId group = r.group;
    readahead::ReadDecision d = std::move(decision_);
    ra_.on_read(r.queue, r.offset, r.buffer.span(r.length), d);
    using Kind = readahead::ReadDecision::Kind;
    // Park before scheduling the prefetches: with an inline backend the
    // awaited prefetch may complete inside schedule().
    bool taken = false;
    if (d.kind == Kind::wait) {
        parked_.emplace(d.wait_ticket, &r);
        taken = true;
    } else if (d.kind == Kind::miss) {
        // The demand read goes ahead of its own read-ahead.
        hooks_.schedule(r);
        taken = true;
    }
    start_prefetches(d.prefetch, group);
    const Kind kind = d.kind;
    decision_ = std::move(d);
    if (kind == Kind::hit) {
        r.backend_errno = 0;
        hooks_.answer(r);
        taken = true;
    }
    return taken;
}

void ReadAheadPath::cache(const IoRequest& r) {
    std::vector<readahead::Prefetch> list = std::move(decision_.prefetch);
    ra_.on_cache(r.queue, r.offset, r.length, list);
    start_prefetches(list, r.group);
    decision_.prefetch = std::move(list);
}

std::unique_ptr<ReadAheadPath::PrefetchIo> ReadAheadPath::spare_prefetch() {
    if (spare_.empty()) return std::make_unique<PrefetchIo>();
    auto io = std::move(spare_.back());
    spare_.pop_back();
    return io;
}

void ReadAheadPath::start_prefetches(const std::vector<readahead::Prefetch>& list, sched::GroupId group) {
    for (const auto& p : list) {
        auto io = spare_prefetch();
        io->ticket = p.ticket;
        io->sink = this;
        io->op = sched::Op::read;
        io->offset = p.offset;
        io->length = p.length;
        io->queue = p.queue;
        io->group = group;
        io->backend_errno = 0;
        try {
            io->buffer.reserve(p.length);
        } catch (const std::bad_alloc&) {
            // Every prefetch must be completed exactly once, issued or not.
            spare_.push_back(std::move(io));
            ra_.on_prefetch_done(p.ticket, ENOMEM, {});
            wake_parked(p.ticket);
            continue;
        }
        IoRequest& req = *io;
        inflight_.emplace(p.ticket, std::move(io));
        hooks_.schedule(req);
    }
}

bool ReadAheadPath::on_finished(IoRequest& r) {
    if (r.sink == this) return true;
    if (mutates(r.op)) ra_.on_write_done(r.offset, r.length);
    return false;
}

void ReadAheadPath::request_done(IoRequest& r) {
    auto& io = static_cast<PrefetchIo&>(r);
    const std::uint64_t ticket = io.ticket;
    auto it = inflight_.find(ticket);
    if (it == inflight_.end()) return;
    // The cache takes the I/O buffer itself: no copy of the prefetched bytes;
    // it goes back to the pool when the cache drops it.
    readahead::ExtentBytes data;
    if (io.backend_errno == 0) {
        const std::size_t capacity = io.buffer.capacity();
        data = readahead::ExtentBytes(io.buffer.take(), io.length, capacity, buffer_pool::give_disowned);
    }
    io.buffer.release();   // a failed read's buffer: the cache does not count it
    const int error = io.backend_errno;
    spare_.push_back(std::move(it->second));
    inflight_.erase(it);
    ra_.on_prefetch_done(ticket, error, std::move(data));
    wake_parked(ticket);
}

// One read at a time, the first parked first: answering or scheduling one
// may park others, never under this ticket (its prefetch is done).
void ReadAheadPath::wake_parked(std::uint64_t ticket) {
    using Kind = readahead::ReadDecision::Kind;
    for (auto it = parked_.lower_bound(ticket); it != parked_.end() && it->first == ticket;
         it = parked_.lower_bound(ticket)) {
        IoRequest* r = it->second;
        parked_.erase(it);
        auto d = ra_.resume(r->offset, r->buffer.span(r->length));
        if (d.kind == Kind::hit) {
            r->backend_errno = 0;
            hooks_.answer(*r);
        } else if (d.kind == Kind::wait) {
            parked_.emplace(d.wait_ticket, r);   // another prefetch covers the rest
        } else {
            hooks_.schedule(*r);   // dropped (write, error, evicted): read it for real
        }
    }
}

}   // namespace nbdsched::daemon
