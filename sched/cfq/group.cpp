#include "sched/cfq/group.hpp"

namespace nbdsched::sched::cfq {

CfqGroup::CfqGroup(GroupId id_, unsigned weight_, Time now, std::pmr::memory_resource* pool)
    : id(id_), weight(weight_), trees{QueueTree(pool), QueueTree(pool), QueueTree(pool)} {
    ttime.last_end_request = now;
    for (auto& t : trees) t.ttime.last_end_request = now;
    stats.weight = weight_;
}

}   // namespace nbdsched::sched::cfq
