// Server-side read-ahead for one device (seed 004). Pure: it never does I/O.
// It tells the daemon what to prefetch, and the daemon turns each decision
// into an ordinary backend read scheduled for the reader's queue (so the
// scheduler charges it to the right group), then hands the data back.
// Thread-safe (one mutex); meant to be called from the device's loop.
//
// How the daemon drives it, per device:
//
//   ReadAhead ra({.device_size = backend.size(),
//                 .window_bytes = window_bytes(dev.read_ahead_kb, rotational, max_io, opt_io),
//                 .cache_bytes = dev.read_ahead_cache,
//                 .max_io_bytes = max_io});
//
//   READ arrives (queue q, offset, buffer):
//       ra.on_read(q, offset, buffer, d);   // d: a ReadDecision kept for the next read
//       d.kind == hit  -> buffer is filled: reply now, no backend I/O.
//       d.kind == wait -> the read is wholly covered by cached data and
//                         prefetches in flight (any number of them): park it
//                         under d.wait_ticket; when that prefetch completes,
//                         call ra.resume(offset, buffer) and act on its
//                         kind the same way (hit: reply; wait: park again
//                         under the new ticket; miss: submit the read).
//       d.kind == miss -> submit the read to the scheduler as usual.
//       In every case, submit each of d.prefetch as a read (queue p.queue,
//       async unless p.demand, not a client request) into a buffer of
//       p.length bytes, and on completion call
//       ra.on_prefetch_done(p.ticket, err, std::move(buf)).
//       Every Prefetch must be completed exactly once, also when it is never
//       submitted or its queue went away (pass an errno, e.g. ECANCELED):
//       until then its bytes count against the memory bound.
//   WRITE / TRIM / WRITE_ZEROES arrive:  ra.on_write(offset, length)
//       ... and once the backend finished it (ok or not): ra.on_write_done(offset, length)
//       Both calls are needed: a prefetch issued between them may have read
//       the old data, and its result is then thrown away.
//   Connection closes: ra.on_queue_closed(q) (its prefetches in flight still
//       complete normally; their data stays useful to other queues).
//   Stats: ra.stats() (gauges and counters for the control socket/metrics).
//
// Partial coverage: a read that is partly cached or in flight and partly
// not gets a demand prefetch (a "fill") of just the missing span, from its
// first missing byte to its last, and waits as above. On a disk the seek
// is paid either way; the fill saves transferring what is already cached
// and never reads again what a prefetch in flight is reading (issuing the
// whole read did both, and the duplicate competed with the prefetches for
// the one actuator). Gaps on both sides of covered data become one fill
// spanning both: skipping the middle would cost a rotation, more than
// re-reading it. A fill is a sync read (a client waits for it). When it
// cannot be issued (a write pending over it, or no room without evicting
// read-ahead nobody has read yet) the read is a plain miss.
//
// A fill smaller than min_piece_bytes is not issued (the read is a plain
// miss), and prefetches are never split below it: a tiny piece holds a whole
// buffer and its bookkeeping, many times its data.
//
// Memory bound: what the cache holds + what prefetches in flight hold <=
// cache_bytes, counting each piece's buffer as allocated (buffer_bytes) plus
// extent_overhead_bytes. A prefetch that does not fit after evicting is
// simply not issued.
//
// Steady state allocates nothing: the in-flight table's and the cache's
// nodes come from node pools, a caller that keeps its ReadDecision (and
// on_cache's list) reuses its memory, and the extents' buffers are the
// caller's to recycle (ExtentBytes' release).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory_resource>
#include <mutex>
#include <span>
#include <vector>

#include "common/node_pool.hpp"
#include "readahead/cache.hpp"
#include "readahead/streams.hpp"
#include "readahead/window.hpp"

namespace nbdsched::readahead {

// Charged per cached extent or prefetch in flight beside its buffer: its
// map, LRU and in-flight nodes, and the allocator's slack around
// a page-aligned block (aligned_alloc leaves up to a page beside it: with
// 4 KiB pieces the daemon's RSS was twice the data held).
inline constexpr std::uint64_t extent_overhead_bytes = 4096;
// The smallest fill or prefetch split issued (the buffer pool's smallest block).
inline constexpr std::uint64_t min_piece_bytes = 4096;

struct Options {
    std::uint64_t device_size = 0;
    std::uint64_t window_bytes = default_window_bytes;   // 0 = read-ahead off
    std::uint64_t cache_bytes = 64ull << 20;             // memory: cached + in flight
    std::uint64_t max_io_bytes = 1280u << 10;            // prefetches are split to this (0 = no split)
    unsigned streams_per_queue = 8;
    // The memory a buffer for n bytes takes (the daemon's pool rounds sizes
    // up); empty: n.
    std::function<std::uint64_t(std::uint64_t)> buffer_bytes{};
};

struct Prefetch {
    std::uint64_t ticket = 0;
    std::uint64_t queue = 0;   // the queue whose stream asked for it
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    bool demand = false;   // a fill a parked client read waits for: schedule it sync
    std::uint64_t end() const { return offset + length; }
};

struct ReadDecision {
    enum class Kind { hit,
                      wait,
                      miss };
    Kind kind = Kind::miss;
    std::uint64_t wait_ticket = 0;    // kind == wait
    std::vector<Prefetch> prefetch;   // to submit now, whatever the kind
};

struct Stats {
    std::uint64_t window_bytes = 0;
    std::uint64_t hits = 0;    // reads answered from the cache
    std::uint64_t waits = 0;   // reads parked on prefetches in flight (fills included)
    std::uint64_t fills = 0;   // of those, reads partly covered: their missing span was read
    std::uint64_t bytes_filled = 0;
    std::uint64_t waits_failed = 0;   // parked reads that went to the backend after all
    std::uint64_t misses = 0;         // reads that went to the backend
    std::uint64_t hit_bytes = 0;
    std::uint64_t prefetches = 0;   // issued
    std::uint64_t bytes_prefetched = 0;
    std::uint64_t prefetches_dropped = 0;   // failed or made stale by a write
    std::uint64_t prefetches_skipped = 0;   // not issued: memory bound
    std::uint64_t bytes_cached = 0;         // gauge
    std::uint64_t bytes_inflight = 0;       // gauge
    std::uint64_t memory_bytes = 0;         // gauge: what cached and in-flight pieces hold, <= cache_bytes
    std::uint64_t bytes_evicted = 0;
    std::uint64_t bytes_invalidated = 0;
};

class ReadAhead {
public:
    explicit ReadAhead(const Options& options);

    bool enabled() const { return options_.window_bytes > 0; }
    // Decides into `d`, overwriting it; its prefetch list keeps its memory,
    // so a caller that keeps `d` for the next read allocates nothing.
    void on_read(std::uint64_t queue, std::uint64_t offset, std::span<std::byte> out, ReadDecision& d);
    ReadDecision on_read(std::uint64_t queue, std::uint64_t offset, std::span<std::byte> out);
    // A parked read's prefetch completed: hit (`out` filled), wait (another
    // prefetch still covers part of it) or miss. Never prefetches.
    ReadDecision resume(std::uint64_t offset, std::span<std::byte> out);
    // NBD_CMD_CACHE: prefetches for the part of the range neither cached nor
    // in flight (at most the cache's size; none while a write is pending
    // over it), charged to `queue`, into `out` (cleared first, its memory
    // kept). Submit and complete them as on_read's.
    void on_cache(std::uint64_t queue, std::uint64_t offset, std::uint64_t length, std::vector<Prefetch>& out);
    // Copies a wholly cached range into `out`; false (untouched) otherwise.
    bool lookup(std::uint64_t offset, std::span<std::byte> out);
    void on_write(std::uint64_t offset, std::uint64_t length);
    void on_write_done(std::uint64_t offset, std::uint64_t length);
    // error != 0 or a short buffer drops the data. Unknown tickets are ignored.
    void on_prefetch_done(std::uint64_t ticket, int error, ExtentBytes&& data);
    void on_queue_closed(std::uint64_t queue);
    // The device's size changed (seen on reload): drops everything cached,
    // makes every prefetch in flight stale and forgets every stream, so no
    // byte read before the change is served after it; read-ahead runs up to
    // the new end from then on.
    void resize(std::uint64_t device_size);
    Stats stats() const;

private:
    struct InFlight {
        Range range;
        std::uint64_t charge = 0;   // memory it holds (piece_charge)
        bool stale = false;         // a write overlapped it after it was issued
    };
    // How a range not wholly cached stands: covered (cache + prefetches
    // in flight, waiting on `ticket`), and if not, the span to fill.
    struct Cover {
        std::uint64_t covered_bytes = 0;
        std::uint64_t ticket = 0;   // the in-flight prefetch covering the highest part
        Range gap;                  // first missing byte to last; empty: wholly covered
    };
    Cover cover(const Range& r) const;
    const InFlight* inflight_at(std::uint64_t pos, std::uint64_t* ticket) const;
    // Into `d`, whose prefetch list is empty.
    void decide(std::uint64_t queue, const Range& r, std::span<std::byte> out, bool may_fill, ReadDecision& d);
    // Appends to `out`. `reached`, when given: where what is cached or now
    // in flight of `r` ends (r's end when nothing needed fetching).
    void issue(std::uint64_t queue, Range r, bool demand, std::vector<Prefetch>& out,
               std::uint64_t* reached = nullptr);
    // issue()'s loop: pieces of `r` from its start while the cache has room;
    // returns where it stopped.
    std::uint64_t issue_pieces(std::uint64_t queue, const Range& r, bool demand, std::vector<Prefetch>& out);
    bool write_pending(const Range& r) const;
    void mark_stale(std::uint64_t offset, std::uint64_t length);
    // What a piece of n bytes holds, cached or in flight.
    std::uint64_t piece_charge(std::uint64_t n) const;
    // The charge of pieces covering `length` bytes split at the prefetch size.
    std::uint64_t split_charge(std::uint64_t length) const;
    std::uint64_t piece_length(std::uint64_t left) const;

    const Options options_;
    std::uint64_t device_size_;   // options_.device_size until resize(); read this, never options_'s
    mutable std::mutex mutex_;
    ExtentCache cache_;
    StreamTable streams_;
    common::NodePool pool_;                                     // inflight_'s nodes
    std::pmr::map<std::uint64_t, InFlight> inflight_{&pool_};   // by ticket
    std::vector<Range> pending_writes_;                         // on_write seen, on_write_done not yet
    std::uint64_t next_ticket_ = 1;
    std::uint64_t inflight_bytes_ = 0;
    std::uint64_t inflight_charge_ = 0;
    Stats stats_;
};

}   // namespace nbdsched::readahead
