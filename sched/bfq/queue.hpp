// One bfq_queue: the requests of one client connection of one kind (each
// client has a sync and an async queue, like a process in the kernel), kept
// in sector order for the elevator and in arrival order for FIFO expiry,
// plus the per-queue history BFQ bases its decisions on: seek history,
// think time, I/O-boundness, and the budget state.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <optional>

#include "sched/bfq/wf2q.hpp"
#include "sched/request.hpp"
#include "sched/seek_history.hpp"
#include "sched/sorted_array.hpp"
#include "sched/stats.hpp"

namespace nbdsched::sched::bfq {

struct BfqGroup;

struct QueuedRequest {
    Request request;
    Time enqueued{};
};

// The key of a client's sync or async queue in the scheduler's map.
inline std::uint64_t queue_key(QueueId client, bool sync) { return (client << 1) | (sync ? 0u : 1u); }

// Elevator parameters of bfq_choose_req().
struct SeekPolicy {
    std::uint64_t back_max_sectors = 0;
    unsigned back_penalty = 2;
};

class BfqQueue {
public:
    // `pool` holds the queued requests' array.
    BfqQueue(std::uint64_t key, QueueId client, GroupId group, bool sync,
             std::pmr::memory_resource* pool = std::pmr::get_default_resource());

    std::uint64_t key() const { return key_; }
    QueueId client() const { return client_; }
    GroupId group() const { return group_; }
    bool sync() const { return sync_; }

    void add(const Request& request, Time now);
    // Removes one of this queue's requests (a copy is returned, so `queued`
    // may be the one next_request() points at).
    Request take(const Request& queued);
    bool empty() const { return queued_.empty(); }
    std::size_t size() const { return queued_.size(); }

    // bfq_find_next_rq: the FIFO head if it expired (checked once per
    // service period, like the kernel's fifo_expire flag), otherwise the
    // one-way elevator choice from `head` (sectors). Null when empty.
    const Request* next_request(std::uint64_t head, const SeekPolicy& seek, Nanos fifo_expire,
                                Time now);
    // next_request() for a queue of one request (every queue on a RAM
    // device; BFQ asks three times a request, so inline): it is the FIFO
    // head and the elevator's only choice; only whether the FIFO picked it
    // (checked once per service period) depends on the time.
    const Request& only_request(Nanos fifo_expire, Time now) {
        QueuedRequest& only = queued_.front();
        if (!next_ && !fifo_checked_) {
            fifo_checked_ = true;
            if (now >= only.enqueued + fifo_expire) next_from_fifo_ = true;
        }
        next_ = sort_key(only.request);
        return only.request;
    }
    void new_service_period() {
        fifo_checked_ = false;
        next_.reset();
        next_from_fifo_ = false;
    }

    // History updated on arrival (bfq_update_io_thinktime/seektime).
    void note_arrival(const Request& request, Time now, bool nonrot, Nanos slice_idle);
    void note_completion(Time now) { last_end_request_ = now; }
    Time last_end_request() const { return last_end_request_; }
    bool seeky() const;          // BFQQ_SEEKY
    bool seeky_so_far() const;   // seeky, or young and seeking so far (SeekHistory)
    bool has_short_ttime() const { return short_ttime_; }

    Entity entity;
    unsigned dispatched = 0;        // at the device
    std::uint64_t max_budget = 0;   // bfqq->max_budget (sectors)
    Time budget_timeout{};
    bool wait_request = false;           // idle timer armed for this queue
    bool non_blocking_wait_rq = false;   // expired only while waiting for I/O
    std::uint64_t budget_left_at_expiry = 0;
    // bfq_init_bfqq marks a new queue IO_bound: a sequential reader then
    // earns idling (idling_boosts_thr_without_issues) from its first request,
    // before hw_tag is known. Starting unmarked, readers sharing one group got
    // no idling until 120 in-time arrivals, their interleaved requests made
    // the disk look like it queues commands, and idling stayed off.
    bool io_bound = true;
    unsigned requests_within_timer = 0;
    bool closed = false;
    // Injection while this queue is in service and waiting (inject.cpp):
    // requests other queues may have in the device, the measured service
    // time of its own request with the device empty, when the limit last fell.
    unsigned inject_limit = 0;
    Nanos last_serv_time{};
    Time decrease_time{};
    // The client's counters and its current group, kept by the scheduler,
    // and the group this queue is in: found once, not looked up by id on
    // every request.
    EntityStats* client_stats = nullptr;
    const GroupId* client_group = nullptr;
    BfqGroup* home = nullptr;

private:
    // A request's place in sector order (equal sectors by id).
    struct SortKey {
        std::uint64_t sector;
        RequestId id;
        auto operator<=>(const SortKey&) const = default;
    };
    static SortKey sort_key(const Request& r) { return {r.offset / 512, r.id}; }
    struct BySortKey {
        SortKey operator()(const QueuedRequest& q) const { return sort_key(q.request); }
    };
    using Queued = SortedArray<QueuedRequest, BySortKey>;
    Queued::iterator find(SortKey key);
    void update_short_ttime(Nanos slice_idle);

    std::uint64_t key_;
    QueueId client_;
    GroupId group_;
    bool sync_;
    // The queued requests in sector order (the kernel's sort_list), each
    // with its arrival time (its fifo, searched only once per service
    // period). An array, not trees: the three tree nodes in and out per
    // request were most of bfq's cost with a few dozen queued.
    Queued queued_;
    bool fifo_checked_ = false;
    std::optional<SortKey> next_;   // cached choice (bfqq->next_rq)
    bool next_from_fifo_ = false;
    SeekHistory seek_history_;
    std::uint64_t last_request_pos_ = 0;   // sector after the last arrival
    Time last_end_request_{};
    std::uint64_t ttime_samples_ = 0;
    std::uint64_t ttime_total_ = 0;
    std::uint64_t ttime_mean_ = 0;
    bool short_ttime_;
};

}   // namespace nbdsched::sched::bfq
