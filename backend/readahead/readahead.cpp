#include "backend/readahead/readahead.hpp"

#include <algorithm>

namespace nbdsched::backend::readahead {

ReadAhead::ReadAhead(const Options& options)
    : options_(options),
      cache_(options.cache_bytes),
      streams_(options.window_bytes, options.streams_per_queue, options.device_size)
{
    stats_.window_bytes = options.window_bytes;
}

ReadDecision ReadAhead::on_read(std::uint64_t queue, std::uint64_t offset, std::span<std::byte> out)
{
    ReadDecision d;
    const std::uint64_t length = out.size();
    if (!enabled() || length == 0 || offset > options_.device_size || length > options_.device_size - offset)
        return d;
    std::lock_guard lock(mutex_);
    bool served = true;
    if (cache_.lookup(offset, out)) {
        d.kind = ReadDecision::Kind::hit;
        ++stats_.hits;
        stats_.hit_bytes += length;
    } else {
        const Range wanted{offset, length};
        auto covering = std::find_if(inflight_.begin(), inflight_.end(), [&](const auto& entry) {
            const InFlight& f = entry.second;
            return !f.stale && f.range.offset <= wanted.offset && wanted.end() <= f.range.end();
        });
        if (covering != inflight_.end()) {
            d.kind = ReadDecision::Kind::wait;
            d.wait_ticket = covering->first;
            ++stats_.waits;
        } else {
            ++stats_.misses;
            served = false;
        }
    }
    if (auto r = streams_.on_read(queue, offset, length, served))
        d.prefetch = issue(queue, *r);
    return d;
}

std::vector<Prefetch> ReadAhead::issue(std::uint64_t queue, Range r)
{
    std::vector<Prefetch> out;
    // Reading a range a write is busy with would be thrown away anyway.
    if (write_pending(r) || cache_.contains(r.offset, r.length))
        return out;
    const std::uint64_t chunk = options_.max_io_bytes != 0 ? options_.max_io_bytes : r.length;
    for (std::uint64_t pos = r.offset; pos < r.end();) {
        const std::uint64_t n = std::min(chunk, r.end() - pos);
        if (!cache_.make_room(inflight_bytes_ + n)) {
            ++stats_.prefetches_skipped;
            break;
        }
        const std::uint64_t ticket = next_ticket_++;
        inflight_.emplace(ticket, InFlight{{pos, n}, false});
        inflight_bytes_ += n;
        ++stats_.prefetches;
        stats_.bytes_prefetched += n;
        out.push_back({ticket, queue, pos, n});
        pos += n;
    }
    return out;
}

bool ReadAhead::lookup(std::uint64_t offset, std::span<std::byte> out)
{
    if (!enabled())
        return false;
    std::lock_guard lock(mutex_);
    if (!cache_.lookup(offset, out))
        return false;
    stats_.hit_bytes += out.size();
    return true;
}

bool ReadAhead::write_pending(const Range& r) const
{
    return std::any_of(pending_writes_.begin(), pending_writes_.end(),
                       [&](const Range& w) { return w.overlaps(r.offset, r.length); });
}

void ReadAhead::mark_stale(std::uint64_t offset, std::uint64_t length)
{
    for (auto& [ticket, f] : inflight_)
        if (f.range.overlaps(offset, length))
            f.stale = true;
}

void ReadAhead::on_write(std::uint64_t offset, std::uint64_t length)
{
    if (!enabled() || length == 0)
        return;
    std::lock_guard lock(mutex_);
    stats_.bytes_invalidated += cache_.invalidate(offset, length);
    mark_stale(offset, length);
    pending_writes_.push_back({offset, length});
}

void ReadAhead::on_write_done(std::uint64_t offset, std::uint64_t length)
{
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

void ReadAhead::on_prefetch_done(std::uint64_t ticket, int error, std::vector<std::byte>&& data)
{
    std::lock_guard lock(mutex_);
    auto it = inflight_.find(ticket);
    if (it == inflight_.end())
        return;
    const InFlight f = it->second;
    inflight_.erase(it);
    inflight_bytes_ -= f.range.length;
    if (error != 0 || data.size() != f.range.length || f.stale || write_pending(f.range)
        || !cache_.insert(f.range.offset, std::move(data), inflight_bytes_))
        ++stats_.prefetches_dropped;
}

void ReadAhead::on_queue_closed(std::uint64_t queue)
{
    std::lock_guard lock(mutex_);
    streams_.forget(queue);
}

Stats ReadAhead::stats() const
{
    std::lock_guard lock(mutex_);
    Stats s = stats_;
    s.bytes_cached = cache_.bytes();
    s.bytes_inflight = inflight_bytes_;
    s.bytes_evicted = cache_.evicted_bytes();
    return s;
}

} // namespace nbdsched::backend::readahead
