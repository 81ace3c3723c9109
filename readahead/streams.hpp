// Sequential stream detection, per queue (a client connection), several
// streams per queue like the kernel's file_ra_state per open file. Pure
// bookkeeping: it decides which byte range should be prefetched next.
//
// A read continues a stream when it starts where the stream's last read
// ended, or inside the range already prefetched ahead of it. The second
// read of a stream starts read-ahead with a window of 4 x the request
// (at least 16 KiB, at most the maximum); each further window doubles up
// to the maximum. The next window is requested asynchronously, when what
// is prefetched ahead of the reader drops to half the next window: at the
// maximum, when a read reaches the middle of the last window. The kernel
// puts its PG_readahead mark at the start of that window, a whole window
// earlier. Tried on the seed-004 fio run (hdd, 8 readers): the same 1 MiB
// throughput (a 1 MiB reader finds its next window in flight either way),
// while the earlier mark holds up to two windows per stream and, with a
// cache too small for all streams, nearly halved the hits (thrashing). A miss
// inside the prefetched range (evicted before use: thrashing) halves the
// window of that stream, which then grows again as reads hit.
// A read that continues no stream starts a new one, replacing the queue's
// least recently used stream when the queue has `streams_per_queue`.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "readahead/range.hpp"

namespace nbdsched::readahead {

class StreamTable {
public:
    StreamTable(std::uint64_t max_window, unsigned streams_per_queue, std::uint64_t device_size);

    // Records a read of `queue`. `served`: it was (or will be) answered by
    // read-ahead data; a miss inside the supposedly prefetched range (the
    // prefetch was dropped) rewinds the stream so it is prefetched again.
    // Returns the range to prefetch now, if any (clipped to the device).
    std::optional<Range> on_read(std::uint64_t queue, std::uint64_t offset, std::uint64_t length, bool served);
    // How far the prefetch of `requested` (a range on_read returned for
    // `queue`) was issued: short of its end when part was skipped (no cache
    // room, a write pending). The stream's read-ahead then ends at `reached`
    // and its window does not grow, so the next read asks again, instead of
    // missing inside a range never prefetched and halving the window as if
    // the cache thrashed.
    void issued(std::uint64_t queue, const Range& requested, std::uint64_t reached);
    void forget(std::uint64_t queue);
    // Forgets every stream; windows end at `device_size` from now on.
    void reset(std::uint64_t device_size);
    std::size_t stream_count(std::uint64_t queue) const;

private:
    struct Stream {
        std::uint64_t next = 0;     // where the last read ended
        std::uint64_t ra_end = 0;   // end of what was requested ahead
        std::uint64_t window = 0;   // size of the next prefetch
        std::uint64_t last_use = 0;
        unsigned reads = 0;
    };
    Stream* find(std::vector<Stream>& streams, std::uint64_t offset);

    std::uint64_t max_window_;
    unsigned per_queue_;
    std::uint64_t device_size_;
    std::uint64_t clock_ = 0;
    std::unordered_map<std::uint64_t, std::vector<Stream>> queues_;
};

}   // namespace nbdsched::readahead
