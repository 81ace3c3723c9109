// Service trees. The kernel uses rbtrees where equal keys go to the right,
// i.e. ties are served in insertion order; a (key, sequence) ordered set
// gives the same order deterministically. Queues and groups move on these
// trees at every slice, so their nodes come from the scheduler's NodePool.
#pragma once

#include <cstdint>
#include <memory_resource>
#include <set>

#include "sched/cfq/ttime.hpp"

namespace nbdsched::sched::cfq {

struct CfqQueue;
struct CfqGroup;

// Queues of one group and workload type, ordered by rb_key (cfq_rb_root).
struct QueueTree {
    struct Entry {
        std::int64_t key;
        std::uint64_t seq;
        CfqQueue* queue;
        bool operator<(const Entry& o) const { return key != o.key ? key < o.key : seq < o.seq; }
    };
    explicit QueueTree(std::pmr::memory_resource* pool = std::pmr::get_default_resource())
        : entries(pool) {}

    std::pmr::set<Entry> entries;
    ThinkTime ttime;

    std::size_t count() const { return entries.size(); }
    CfqQueue* first() const { return entries.empty() ? nullptr : entries.begin()->queue; }
    void insert(CfqQueue& q, std::int64_t key);
    void erase(CfqQueue& q);

private:
    std::uint64_t next_seq_ = 0;
};

// Groups ordered by vdisktime (cfqd->grp_service_tree). vdisktime wraps at
// 2^64 (about 53 days of busy device at equal weights, sooner with short
// slices); the kernel orders by the signed vdisktime - min_vdisktime
// (cfqg_key), so that a group past the wrap stays behind the others. The
// signed difference of two vdisktimes gives the same order, without
// re-keying as min_vdisktime moves, since the active groups' vdisktimes are
// within 2^63 of each other and of min_vdisktime.
struct GroupTree {
    struct Entry {
        std::uint64_t vdisktime;
        std::uint64_t seq;
        CfqGroup* group;
        bool operator<(const Entry& o) const {
            return vdisktime != o.vdisktime ? std::int64_t(vdisktime - o.vdisktime) < 0 : seq < o.seq;
        }
    };
    explicit GroupTree(std::pmr::memory_resource* pool = std::pmr::get_default_resource())
        : entries(pool) {}

    std::pmr::set<Entry> entries;
    std::uint64_t min_vdisktime = 0;

    bool empty() const { return entries.empty(); }
    std::size_t count() const { return entries.size(); }
    CfqGroup* first() const { return entries.empty() ? nullptr : entries.begin()->group; }
    CfqGroup* last() const { return entries.empty() ? nullptr : entries.rbegin()->group; }
    void insert(CfqGroup& g);
    void erase(CfqGroup& g);
    void update_min_vdisktime();   // monotonic, follows the leftmost group

private:
    std::uint64_t next_seq_ = 0;
};

}   // namespace nbdsched::sched::cfq
