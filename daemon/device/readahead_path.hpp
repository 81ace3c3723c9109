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
// Prefetch buffers exist only while their read is in flight, and those bytes
// are already counted against read_ahead_cache by ReadAhead.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <vector>

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
    void cache(const IoRequest& r) { start_prefetches(ra_.on_cache(r.queue, r.offset, r.length), r.group); }

    readahead::Stats stats() const { return ra_.stats(); }
    std::size_t parked() const { return parked_count_; }
    std::size_t prefetches_in_flight() const { return inflight_.size(); }

    // Prefetch completion (the device calls the sink of every request).
    void request_done(IoRequest& r) override;

private:
    struct PrefetchIo : IoRequest {
        std::uint64_t ticket = 0;
    };

    void start_prefetches(const std::vector<readahead::Prefetch>& list, sched::GroupId group);
    void wake_parked(std::uint64_t ticket);

    readahead::ReadAhead ra_;
    Hooks hooks_;
    std::map<std::uint64_t, std::unique_ptr<PrefetchIo>> inflight_;   // by ticket
    std::map<std::uint64_t, std::vector<IoRequest*>> parked_;         // by the ticket they wait for
    std::size_t parked_count_ = 0;
};

}   // namespace nbdsched::daemon
