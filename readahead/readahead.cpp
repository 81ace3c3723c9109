#include "readahead/readahead.hpp"

#include <algorithm>

namespace nbdsched::readahead {

ReadAhead::ReadAhead(const Options& options)
    : options_(options),
      device_size_(options.device_size),
      cache_(options.cache_bytes, extent_overhead_bytes),
      streams_(capped_window_bytes(options.window_bytes, options.cache_bytes, options.max_io_bytes),
               options.streams_per_queue, options.device_size) {
    stats_.window_bytes = capped_window_bytes(options.window_bytes, options.cache_bytes, options.max_io_bytes);
}

void ReadAhead::on_read(std::uint64_t queue, std::uint64_t offset, std::span<std::byte> out, ReadDecision& d) {
    d.kind = ReadDecision::Kind::miss;
    d.wait_ticket = 0;
    d.prefetch.clear();
    const std::uint64_t length = out.size();
    if (!enabled() || length == 0)
        return;
    std::lock_guard lock(mutex_);
    if (offset > device_size_ || length > device_size_ - offset)
        return;
    decide(queue, {offset, length}, out, true, d);
    switch (d.kind) {
    case ReadDecision::Kind::hit:
        ++stats_.hits;
        break;
    case ReadDecision::Kind::wait:
        ++stats_.waits;
        stats_.fills += d.prefetch.empty() ? 0 : 1;
        break;
    case ReadDecision::Kind::miss:
        ++stats_.misses;
        break;
    }
    // A fill (in d.prefetch already) goes before the stream's next window:
    // the client waits for the fill, and the window continues where it ends.
    if (auto r = streams_.on_read(queue, offset, length, d.kind != ReadDecision::Kind::miss)) {
        std::uint64_t reached = 0;
        issue(queue, *r, false, d.prefetch, &reached);
        streams_.issued(queue, *r, reached);
    }
}

ReadDecision ReadAhead::on_read(std::uint64_t queue, std::uint64_t offset, std::span<std::byte> out) {
    ReadDecision d;
    on_read(queue, offset, out, d);
    return d;
}

ReadDecision ReadAhead::resume(std::uint64_t offset, std::span<std::byte> out) {
    if (!enabled() || out.empty())
        return {};
    std::lock_guard lock(mutex_);
    ReadDecision d;
    decide(0, {offset, out.size()}, out, false, d);
    stats_.waits_failed += d.kind == ReadDecision::Kind::miss ? 1 : 0;
    return d;
}

void ReadAhead::decide(std::uint64_t queue, const Range& r, std::span<std::byte> out, bool may_fill,
                       ReadDecision& d) {
    if (cache_.lookup(r.offset, out)) {
        d.kind = ReadDecision::Kind::hit;
        stats_.hit_bytes += r.length;
        return;
    }
    const Cover c = cover(r);
    if (c.gap.length == 0) {
        d.kind = ReadDecision::Kind::wait;
        d.wait_ticket = c.ticket;
        return;
    }
    // Partly covered: fill the missing span (see the header for why), but
    // only as a whole, or the read would go to the backend anyway; and not
    // by evicting read-ahead nobody has read yet (a plain miss needs no
    // cache memory at all).
    if (may_fill && c.covered_bytes > 0 && c.gap.length >= min_piece_bytes && !write_pending(c.gap) &&
        cache_.make_room(inflight_charge_ + split_charge(c.gap.length), true)) {
        issue(queue, c.gap, true, d.prefetch);
        if (!d.prefetch.empty()) {
            d.kind = ReadDecision::Kind::wait;
            d.wait_ticket = d.prefetch.back().ticket;
        }
    }
}

const ReadAhead::InFlight* ReadAhead::inflight_at(std::uint64_t pos, std::uint64_t* ticket) const {
    const InFlight* best = nullptr;
    for (const auto& [t, f] : inflight_)
        if (!f.stale && f.range.contains(pos) && (best == nullptr || f.range.end() > best->range.end())) {
            best = &f;
            *ticket = t;
        }
    return best;
}

ReadAhead::Cover ReadAhead::cover(const Range& r) const {
    Cover c;
    std::uint64_t gap_start = 0, gap_end = 0;
    for (std::uint64_t pos = r.offset; pos < r.end();) {
        const auto extent = cache_.extent_from(pos);
        std::uint64_t ticket = 0;
        std::uint64_t covered_to = 0;
        if (extent && extent->contains(pos)) {
            covered_to = extent->end();
        } else if (const InFlight* f = inflight_at(pos, &ticket)) {
            covered_to = f->range.end();
            c.ticket = ticket;
        }
        if (covered_to != 0) {
            c.covered_bytes += std::min(covered_to, r.end()) - pos;
            pos = covered_to;
            continue;
        }
        // Missing up to the next byte that is cached or in flight.
        std::uint64_t next = extent ? std::min(extent->offset, r.end()) : r.end();
        for (const auto& [t, f] : inflight_)
            if (!f.stale && f.range.offset > pos)
                next = std::min(next, f.range.offset);
        if (gap_end == 0)
            gap_start = pos;
        gap_end = next;
        pos = next;
    }
    if (gap_end != 0)
        c.gap = {gap_start, gap_end - gap_start};
    return c;
}

std::uint64_t ReadAhead::piece_charge(std::uint64_t n) const {
    return cache_.charge(options_.buffer_bytes ? options_.buffer_bytes(n) : n);
}

// The next piece of a split with `left` bytes to go: max_io_bytes (never
// under min_piece_bytes), and a tail under min_piece_bytes joins the piece
// before it rather than stand alone.
std::uint64_t ReadAhead::piece_length(std::uint64_t left) const {
    if (options_.max_io_bytes == 0)
        return left;
    const std::uint64_t chunk = std::max(options_.max_io_bytes, min_piece_bytes);
    return left - std::min(chunk, left) < min_piece_bytes ? left : chunk;
}

std::uint64_t ReadAhead::split_charge(std::uint64_t length) const {
    std::uint64_t total = 0;
    for (std::uint64_t left = length; left > 0;) {
        const std::uint64_t n = piece_length(left);
        total += piece_charge(n);
        left -= n;
    }
    return total;
}

void ReadAhead::issue(std::uint64_t queue, Range r, bool demand, std::vector<Prefetch>& out, std::uint64_t* reached) {
    std::uint64_t pos = 0;
    // Reading a range a write is busy with would be thrown away anyway; a
    // piece under a page holds a whole buffer for a few bytes (only the
    // device's last bytes may be that short), so it is not worth asking again.
    if (cache_.contains(r.offset, r.length) || (r.length < min_piece_bytes && r.end() < device_size_))
        pos = r.end();
    else if (write_pending(r))
        pos = r.offset;
    else
        pos = issue_pieces(queue, r, demand, out);
    if (reached != nullptr)
        *reached = pos;
}

std::uint64_t ReadAhead::issue_pieces(std::uint64_t queue, const Range& r, bool demand, std::vector<Prefetch>& out) {
    std::uint64_t pos = r.offset;
    while (pos < r.end()) {
        const std::uint64_t n = piece_length(r.end() - pos);
        const std::uint64_t charge = piece_charge(n);
        if (!cache_.make_room(inflight_charge_ + charge)) {
            ++stats_.prefetches_skipped;
            break;
        }
        const std::uint64_t ticket = next_ticket_++;
        inflight_.emplace(ticket, InFlight{{pos, n}, charge, false});
        inflight_bytes_ += n;
        inflight_charge_ += charge;
        if (demand) {
            stats_.bytes_filled += n;
        } else {
            ++stats_.prefetches;
            stats_.bytes_prefetched += n;
        }
        out.push_back({ticket, queue, pos, n, demand});
        pos += n;
    }
    return pos;
}

void ReadAhead::on_cache(std::uint64_t queue, std::uint64_t offset, std::uint64_t length,
                         std::vector<Prefetch>& out) {
    out.clear();
    if (!enabled())
        return;
    std::lock_guard lock(mutex_);
    const Range r{offset, std::min(length, options_.cache_bytes)};
    const Cover c = cover(r);
    if (c.gap.length != 0)
        issue(queue, c.gap, false, out);
}

bool ReadAhead::lookup(std::uint64_t offset, std::span<std::byte> out) {
    if (!enabled())
        return false;
    std::lock_guard lock(mutex_);
    if (!cache_.lookup(offset, out))
        return false;
    stats_.hit_bytes += out.size();
    return true;
}

bool ReadAhead::write_pending(const Range& r) const {
    return std::any_of(pending_writes_.begin(), pending_writes_.end(),
                       [&](const Range& w) { return w.overlaps(r.offset, r.length); });
}

void ReadAhead::mark_stale(std::uint64_t offset, std::uint64_t length) {
    for (auto& [ticket, f] : inflight_)
        if (f.range.overlaps(offset, length))
            f.stale = true;
}

void ReadAhead::on_write(std::uint64_t offset, std::uint64_t length) {
    if (!enabled() || length == 0)
        return;
    std::lock_guard lock(mutex_);
    stats_.bytes_invalidated += cache_.invalidate(offset, length);
    mark_stale(offset, length);
    pending_writes_.push_back({offset, length});
}

void ReadAhead::on_write_done(std::uint64_t offset, std::uint64_t length) {
    if (!enabled() || length == 0)
        return;
    std::lock_guard lock(mutex_);
    // A prefetch issued while the write was pending may have read either
    // side of it: stale too. The cache itself was cleaned in on_write and
    // nothing overlapping could be inserted since (write_pending).
    mark_stale(offset, length);
    auto it = std::find(pending_writes_.begin(), pending_writes_.end(), Range{offset, length});
    if (it != pending_writes_.end())
        pending_writes_.erase(it);
}

void ReadAhead::on_prefetch_done(std::uint64_t ticket, int error, ExtentBytes&& data) {
    std::lock_guard lock(mutex_);
    auto it = inflight_.find(ticket);
    if (it == inflight_.end())
        return;
    const InFlight f = it->second;
    inflight_.erase(it);
    inflight_bytes_ -= f.range.length;
    inflight_charge_ -= f.charge;
    if (error != 0 || data.size() != f.range.length || f.stale || write_pending(f.range) ||
        !cache_.insert(f.range.offset, std::move(data), inflight_charge_))
        ++stats_.prefetches_dropped;
}

void ReadAhead::on_queue_closed(std::uint64_t queue) {
    std::lock_guard lock(mutex_);
    streams_.forget(queue);
}

void ReadAhead::resize(std::uint64_t device_size) {
    std::lock_guard lock(mutex_);
    if (device_size == device_size_)
        return;
    device_size_ = device_size;
    stats_.bytes_invalidated += cache_.bytes();
    cache_.clear();
    for (auto& [ticket, f] : inflight_)
        f.stale = true;
    streams_.reset(device_size);
}

Stats ReadAhead::stats() const {
    std::lock_guard lock(mutex_);
    Stats s = stats_;
    s.bytes_cached = cache_.bytes();
    s.bytes_inflight = inflight_bytes_;
    s.memory_bytes = cache_.memory() + inflight_charge_;
    s.bytes_evicted = cache_.evicted_bytes();
    return s;
}

}   // namespace nbdsched::readahead
