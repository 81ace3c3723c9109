// A cfq_queue: the pending requests of one client connection (sync queue) or
// the shared async queue of a group. Its requests sorted by sector (the
// one-way elevator picks next_rq from there), each with its FIFO expiry time.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <optional>
#include <vector>

#include "sched/cfq/ttime.hpp"
#include "sched/request.hpp"
#include "sched/seek_history.hpp"
#include "sched/sorted_array.hpp"
#include "sched/stats.hpp"

namespace nbdsched::sched::cfq {

struct CfqGroup;
struct QueueTree;

enum class WlType : int { async = 0,
                          sync_noidle = 1,
                          sync = 2 };   // wl_type_t
inline constexpr int kWlTypes = 3;

struct ElevatorParams {
    std::uint64_t back_max_sectors;   // back_seek_max (KiB) * 2
    unsigned back_penalty;
};

struct CfqQueue {
    struct Pending {
        Request req;
        Time fifo_time{};
        std::uint64_t sector() const { return req.offset / 512; }
    };
    // A pending request's place in sector order (equal sectors in arrival
    // order, as the kernel's rb-tree inserts them) and the slot that holds it.
    struct Place {
        std::uint64_t sector;
        std::uint64_t arrival;
        auto operator<=>(const Place&) const = default;
    };
    struct Entry {
        Place place;
        std::uint32_t slot;
    };
    struct ByPlace {
        Place operator()(const Entry& e) const { return e.place; }
    };

    // `pool` holds the pending requests' arrays.
    CfqQueue(std::uint64_t key, std::optional<QueueId> client, CfqGroup* group, bool sync, Time now,
             std::pmr::memory_resource* pool = std::pmr::get_default_resource());

    // --- requests ---
    void add(const Request& req, Time fifo_time, std::uint64_t last_position, const ElevatorParams& e);
    // Removes `which` (about to be dispatched) and moves next_rq along the elevator.
    Request remove_for_dispatch(Entry which, const ElevatorParams& e);
    bool empty() const { return sorted.empty(); }
    std::size_t queued() const { return sorted.size(); }
    // cfq_check_fifo(): the FIFO head once per slice, if it has expired.
    std::optional<Entry> check_fifo(Time now);
    // next_rq's request; null when the queue is empty.
    const Pending* next() const { return next_rq ? &slots[next_rq->slot] : nullptr; }
    const Pending& at(const Entry& entry) const { return slots[entry.slot]; }

    // --- seek and idle heuristics ---
    void update_seek(const Request& req, bool rotational);
    bool seeky() const;          // CFQQ_SEEKY
    bool seeky_so_far() const;   // seeky, or young and seeking so far (SeekHistory)

    const std::uint64_t key;               // creation order; breaks no ties, only names
    const std::optional<QueueId> client;   // nullopt for a group's shared async queue
    CfqGroup* const group;
    const bool sync;

    // The pending requests (the kernel keeps them twice, in an rb-tree by
    // sector and a FIFO list; the FIFO's head is searched for here, once per
    // slice). They stay in their slots while `sorted` orders them by sector:
    // an insert or a removal moves 24 bytes a request queued behind it, which
    // for a queue's few dozen costs less than a tree node and a list node in
    // and out per request.
    std::pmr::vector<Pending> slots;
    std::pmr::vector<std::uint32_t> free_slots;
    SortedArray<Entry, ByPlace> sorted;
    std::optional<Entry> next_rq;
    std::uint64_t arrivals = 0;

    // Service tree membership.
    QueueTree* tree = nullptr;
    std::int64_t rb_key = 0;
    std::uint64_t tree_seq = 0;

    // Slice bookkeeping (ns since the driver's epoch).
    Time dispatch_start{};
    Nanos allocated_slice{};
    std::uint64_t slice_dispatch = 0;
    std::uint64_t slice_charge = 0;    // IOPS mode's cost of this slice's dispatches (iops_charge_kb)
    std::optional<Time> slice_start;   // set at the first completion of the slice
    Time slice_end{};
    std::int64_t slice_resid = 0;
    int dispatched = 0;

    SeekHistory seek_history;
    std::uint64_t last_request_pos = 0;
    ThinkTime ttime;   // the process's think time (cic->ttime)
    // The client's counters (CfqScheduler::queue_stats_), found once rather
    // than hashed on every dispatch; null for a group's async queue.
    EntityStats* client_stats = nullptr;

    bool on_rr = false, wait_request = false, must_dispatch = false, fifo_expire = false;
    bool idle_window = false, slice_new = false, deep = false, wait_busy = false;
    bool closed = false;        // the client went away (the kernel's "task has exited")
    bool seeky_slice = false;   // this slice was cut at its first completion (contended_seeky_depth); for stats only

    WlType type() const {
        if (!sync) return WlType::async;
        return idle_window ? WlType::sync : WlType::sync_noidle;
    }
};

}   // namespace nbdsched::sched::cfq
