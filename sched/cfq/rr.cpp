// The round robin: queues on their group's service trees, groups on the
// device's group tree, and charging a group for the service it received
// (cfq_service_tree_add, cfq_group_notify_queue_add/del, cfq_group_served).
#include <algorithm>

#include "sched/cfq/cfq_scheduler.hpp"
#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {
namespace {

// cfqg_scale_charge(): charge / vfraction, in fixed point. The shift is done
// in 128 bits: a slice charge above 2^40 ns (18 min; slices have no upper
// bound) would lose its top bits. The result is capped at 2^62, so that one
// charge keeps the group's vdisktime within 2^63 of the others (the group
// tree's signed order): such a group goes last, as it should.
std::uint64_t scale_charge(std::uint64_t charge, unsigned vfraction) {
    constexpr std::uint64_t kMaxCharge = std::uint64_t(1) << 62;
    const unsigned __int128 v =
        (static_cast<unsigned __int128>(charge) << (2 * kServiceShift)) / std::max(vfraction, 1u);
    return v > kMaxCharge ? kMaxCharge : static_cast<std::uint64_t>(v);
}

}   // namespace

void CfqScheduler::service_tree_add(CfqQueue& q, bool add_front, Time now) {
    QueueTree& st = q.group->tree(q.type());
    std::int64_t key;
    if (!add_front) {
        // Service time key: now, plus an offset that grows with the number
        // of queues in the group and with the gap to the best priority's
        // slice, minus what was left of the last slice (cfq_slice_offset).
        key = now.count() + slice_offset(q) - q.slice_resid;
        q.slice_resid = 0;
    } else {
        // A preempting queue goes in front of everyone.
        CfqQueue* first = st.first();
        key = -std::int64_t(1'000'000'000) + (first ? first->rb_key : now.count());
    }
    bool new_queue = true;
    if (q.tree) {
        new_queue = false;
        if (key == q.rb_key && q.tree == &st) return;
        q.tree->erase(q);
    }
    st.insert(q, key);
    if (add_front || !new_queue) return;
    group_notify_add(*q.group);
}

void CfqScheduler::resort_rr_list(CfqQueue& q, Time now) {
    if (q.on_rr) service_tree_add(q, false, now);
}

void CfqScheduler::add_rr(CfqQueue& q, Time now) {
    q.on_rr = true;
    ++busy_queues_;
    if (q.sync) ++busy_sync_queues_;
    resort_rr_list(q, now);
}

void CfqScheduler::del_rr(CfqQueue& q) {
    q.on_rr = false;
    if (q.tree) q.tree->erase(q);
    group_notify_del(*q.group);
    --busy_queues_;
    if (q.sync) --busy_sync_queues_;
}

void CfqScheduler::group_notify_add(CfqGroup& g) {
    ++g.nr_cfqq;
    if (g.on_tree) return;
    // "Currently put the group at the end": behind the last group, so a
    // group that was idle does not come back with a credit.
    if (CfqGroup* last = grp_tree_.last())
        g.vdisktime = last->vdisktime + (iops_mode() ? kIopsModeGroupDelay : kSliceModeGroupDelay);
    else
        g.vdisktime = grp_tree_.min_vdisktime;
    group_tree_add(g);
}

void CfqScheduler::group_notify_del(CfqGroup& g) {
    --g.nr_cfqq;
    if (g.nr_cfqq > 0) return;
    group_tree_del(g);
    g.saved_wl_slice = Nanos{};
}

void CfqScheduler::group_tree_add(CfqGroup& g) {
    // Activation: a pending weight change lands now (cfq_update_group_weight),
    // then vfraction = weight / children_weight of the root.
    if (g.new_weight) {
        g.weight = g.new_weight;
        g.new_weight = 0;
    }
    active_weight_ += g.weight;
    std::uint64_t vfr = (std::uint64_t(1) << kServiceShift) * g.weight / active_weight_;
    g.vfraction = unsigned(std::max<std::uint64_t>(vfr, 1));
    grp_tree_.insert(g);
}

void CfqScheduler::group_tree_del(CfqGroup& g) {
    if (!g.on_tree) return;
    active_weight_ -= g.weight;
    g.vfraction = 0;
    grp_tree_.erase(g);
}

void CfqScheduler::group_served(CfqGroup& g, CfqQueue& q, Time now) {
    const int nr_sync = g.nr_cfqq - int(g.busy_async_queues());
    const Nanos used = slice_usage(q, now);
    std::uint64_t charge = std::uint64_t(used.count());
    // IOPS mode charges requests (by size, iops_charge); an async queue with
    // no sync company pays its whole slice (it would otherwise look cheap on
    // a queueing device).
    if (iops_mode()) charge = q.slice_charge;
    else if (!q.sync && nr_sync == 0) charge = std::uint64_t(q.allocated_slice.count());

    if (g.on_tree) {
        // vfraction is only valid on the tree: leave, charge, come back.
        const unsigned vfr = g.vfraction;
        group_tree_del(g);
        g.vdisktime += scale_charge(charge, vfr);
        group_tree_add(g);
    }
    if (workload_expires_ > now) {
        g.saved_wl_slice = workload_expires_ - now;
        g.saved_wl_type = serving_type_;
    } else {
        g.saved_wl_slice = Nanos{};
    }
}

}   // namespace nbdsched::sched::cfq
