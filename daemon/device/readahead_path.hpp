// Server-side read-ahead in a device's request path (seed 004): the
// daemon half of readahead/readahead.hpp, driven exactly as that
// header asks. The device hands it every client request before scheduling:
//
//   READ   answered from the cache at once (hit), parked until the
//          prefetches in flight that cover it have landed (wait: one at a
//          time, ReadAhead::resume names the next), or scheduled as usual
//          (miss). A fill (the missing part of a partly covered read) is
//          scheduled as a sync read, since a client waits for it. Whatever the
//          outcome, the prefetches the decision asks for are scheduled as
//          async reads of the reader's queue and group, so the scheduler
//          charges them to the client that caused them.
//   WRITE / TRIM / WRITE_ZEROES   invalidate before they are scheduled, and
//          report when the backend is done (see on_done).
//
// A prefetch's buffer comes from the thread's buffer pool and goes to the
// read-ahead cache with its data; when the cache drops the extent, the buffer
// goes back to the pool (bytes counted against read_ahead_cache by
// ReadAhead all along). With the prefetch requests kept for the next
// prefetch, the tables' nodes from a node pool and the decision's list
// reused, a prefetch in steady state allocates nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <memory_resource>
#include <vector>

#include "common/node_pool.hpp"
#include "readahead/readahead.hpp"
#include "daemon/device/io_request.hpp"

namespace nbdsched::daemon {

class ReadAheadPath final : public RequestSink {
public:
    // How the path reaches back into its device (both run on the loop):
    //   schedule(r, prefetch): queue r at the scheduler; prefetch requests are
    //       async reads the device does not count as client requests.
    //   answer(r): r, a client read taken by intercept(), was served from
    //       the read-ahead cache (a hit, at once or after waiting); reply now.
    struct Hooks {
        std::function<void(IoRequest&)> schedule;
        std::function<void(IoRequest&)> answer;
    };

    ReadAheadPath(const readahead::Options& options, Hooks hooks);
    ~ReadAheadPath();
    ReadAheadPath(const ReadAheadPath&) = delete;
    ReadAheadPath& operator=(const ReadAheadPath&) = delete;

    // A client request on its way in. True: taken (answered or parked; the
    // device must not schedule it); false: schedule it as usual.
    bool intercept(IoRequest& r);
    // The device finished a request. Returns true for a prefetch of ours (the
    // device then neither counts it nor tells anyone else); for a client
    // write/trim/zeroes, records that the backend is done with the range.
    bool on_finished(IoRequest& r);
    void on_queue_closed(sched::QueueId queue) { ra_.on_queue_closed(queue); }
    // The device's size changed: nothing read before serves after (any thread).
    void resize(std::uint64_t device_size) { ra_.resize(device_size); }
    // NBD_CMD_CACHE: prefetch what of r's range is not cached yet. r is not
    // taken: the device answers it at once (CACHE is a hint).
    void cache(const IoRequest& r);

    readahead::Stats stats() const { return ra_.stats(); }
    std::size_t parked() const { return parked_.size(); }
    std::size_t prefetches_in_flight() const { return inflight_.size(); }

    // Prefetch completion (the device calls the sink of every request).
    void request_done(IoRequest& r) override;

private:
    struct PrefetchIo : IoRequest {
        std::uint64_t ticket = 0;
    };

    void start_prefetches(const std::vector<readahead::Prefetch>& list, sched::GroupId group);
    void wake_parked(std::uint64_t ticket);
    // A prefetch request kept from an earlier prefetch, or a new one.
    std::unique_ptr<PrefetchIo> spare_prefetch();

    readahead::ReadAhead ra_;
    Hooks hooks_;
    // The last decision, kept for its list's memory. Moved out while its
    // prefetches start, in case starting one leads back into intercept().
    readahead::ReadDecision decision_;
    // The maps' nodes (declared before them: outlives them).
    common::NodePool pool_;
    std::pmr::map<std::uint64_t, std::unique_ptr<PrefetchIo>> inflight_{&pool_};   // by ticket
    // By the ticket they wait for, in the order they came.
    std::pmr::multimap<std::uint64_t, IoRequest*> parked_{&pool_};
    // Prefetch requests done, for the next ones (no buffer: the cache took
    // it). At most as many as were in flight at once, which the cache bounds.
    std::vector<std::unique_ptr<PrefetchIo>> spare_;
};

}   // namespace nbdsched::daemon
