// A cfq_group: one tenant (cgroup) on this device. Groups are flat: all are
// children of an implicit root with no I/O of its own, so a group's vfraction
// is its weight over the sum of the weights of the active (backlogged) groups.
#pragma once

#include <array>
#include <cstdint>
#include <memory>

#include "sched/cfq/queue.hpp"
#include "sched/cfq/service_tree.hpp"
#include "sched/stats.hpp"

namespace nbdsched::sched::cfq {

struct CfqGroup {
    // `pool` holds the nodes of the group's service trees.
    CfqGroup(GroupId id, unsigned weight, Time now, std::pmr::memory_resource* pool);

    const GroupId id;
    unsigned weight;
    unsigned new_weight = 0;   // applied on the next activation, as the kernel does

    // Group service tree membership.
    bool on_tree = false;
    std::uint64_t vdisktime = 0;
    std::uint64_t tree_seq = 0;
    unsigned vfraction = 0;   // fixed point, kServiceShift

    int nr_cfqq = 0;   // queues of this group on the round robin
    unsigned busy_queues_avg = 0;
    // Best-effort class only: [async, sync-noidle, sync].
    std::array<QueueTree, kWlTypes> trees;

    Nanos saved_wl_slice{};
    WlType saved_wl_type = WlType::sync_noidle;

    int dispatched = 0;
    ThinkTime ttime;

    std::unique_ptr<CfqQueue> async_queue;   // shared by all clients of the group

    GroupStats stats;

    QueueTree& tree(WlType t) { return trees[std::size_t(t)]; }
    unsigned busy_queues() const {
        return unsigned(trees[0].count() + trees[1].count() + trees[2].count());
    }
    unsigned busy_async_queues() const { return unsigned(trees[0].count()); }
};

}   // namespace nbdsched::sched::cfq
