#include "daemon/device/readahead_path.hpp"

#include <cerrno>
#include <cstdlib>
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
    auto d = ra_.on_read(r.queue, r.offset, r.buffer.span(r.length));
    using Kind = readahead::ReadDecision::Kind;
    // Park before scheduling the prefetches: with an inline backend the
    // awaited prefetch may complete inside schedule().
    bool taken = false;
    if (d.kind == Kind::wait) {
        parked_[d.wait_ticket].push_back(&r);
        ++parked_count_;
        taken = true;
    } else if (d.kind == Kind::miss) {
        // The demand read goes ahead of its own read-ahead.
        hooks_.schedule(r);
        taken = true;
    }
    start_prefetches(d.prefetch, group);
    if (d.kind == Kind::hit) {
        r.backend_errno = 0;
        hooks_.answer(r);
        taken = true;
    }
    return taken;
}

void ReadAheadPath::start_prefetches(const std::vector<readahead::Prefetch>& list, sched::GroupId group) {
    for (const auto& p : list) {
        auto io = std::make_unique<PrefetchIo>();
        io->ticket = p.ticket;
        io->sink = this;
        io->op = sched::Op::read;
        io->offset = p.offset;
        io->length = p.length;
        io->queue = p.queue;
        io->group = group;
        try {
            io->buffer.reserve(p.length);
        } catch (const std::bad_alloc&) {
            // Every prefetch must be completed exactly once, issued or not.
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
    // The cache takes the I/O buffer itself: no copy of the prefetched bytes.
    readahead::ExtentBytes data;
    if (io.backend_errno == 0) {
        const std::size_t capacity = io.buffer.capacity();
        data = readahead::ExtentBytes(io.buffer.take(), io.length, capacity, std::free);
    }
    const int error = io.backend_errno;
    inflight_.erase(it);
    ra_.on_prefetch_done(ticket, error, std::move(data));
    wake_parked(ticket);
}

void ReadAheadPath::wake_parked(std::uint64_t ticket) {
    auto it = parked_.find(ticket);
    if (it == parked_.end()) return;
    auto waiting = std::move(it->second);
    parked_.erase(it);
    parked_count_ -= waiting.size();
    using Kind = readahead::ReadDecision::Kind;
    for (IoRequest* r : waiting) {
        auto d = ra_.resume(r->offset, r->buffer.span(r->length));
        if (d.kind == Kind::hit) {
            r->backend_errno = 0;
            hooks_.answer(*r);
        } else if (d.kind == Kind::wait) {
            parked_[d.wait_ticket].push_back(r);   // another prefetch covers the rest
            ++parked_count_;
        } else {
            hooks_.schedule(*r);   // dropped (write, error, evicted): read it for real
        }
    }
}

}   // namespace nbdsched::daemon
