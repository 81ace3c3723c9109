#include "sched/cfq/service_tree.hpp"

#include "sched/cfq/group.hpp"

namespace nbdsched::sched::cfq {

void QueueTree::insert(CfqQueue& q, std::int64_t key) {
    q.tree = this;
    q.rb_key = key;
    q.tree_seq = next_seq_++;
    entries.insert(Entry{key, q.tree_seq, &q});
}

void QueueTree::erase(CfqQueue& q) {
    entries.erase(Entry{q.rb_key, q.tree_seq, &q});
    q.tree = nullptr;
}

void GroupTree::insert(CfqGroup& g) {
    g.tree_seq = next_seq_++;
    g.on_tree = true;
    entries.insert(Entry{g.vdisktime, g.tree_seq, &g});
}

void GroupTree::erase(CfqGroup& g) {
    entries.erase(Entry{g.vdisktime, g.tree_seq, &g});
    g.on_tree = false;
}

void GroupTree::update_min_vdisktime() {
    if (entries.empty()) return;
    std::uint64_t v = entries.begin()->vdisktime;
    if (std::int64_t(v - min_vdisktime) > 0) min_vdisktime = v;
}

}   // namespace nbdsched::sched::cfq
