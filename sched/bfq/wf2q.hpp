// B-WF2Q+ (bfq-wf2q.c): one service tree per scheduling level. Entities are
// queues (in a group's tree) or groups (in the device tree). Virtual times are
// in units of service (sectors) << kServiceShift divided by weight, exactly as
// the kernel's bfq_delta(). Selection picks, among the eligible entities
// (start <= vtime), the one with the smallest finish; when none is eligible
// the virtual time jumps to the smallest start.
//
// The kernel keeps augmented rbtrees; here a vector sorted by a stable id
// holds the members and selection scans it. That is O(n) per selection, but
// selection happens once per budget, and the scan order is deterministic
// (ties go to the smaller key). A budget can be one request: on a RAM device
// a lone queue empties, leaves and comes back for every request, so joining
// and leaving must be cheap, and with few entities a vector is (no node to
// allocate, a short move); with thousands of busy queues the move is still
// small beside the scan. The idle tree is ordered by finish time, as the
// kernel's is, so that forgetting the entities vtime has passed (on every
// dispatch) looks only at those.
#pragma once

#include <cstdint>
#include <map>
#include <memory_resource>
#include <utility>
#include <vector>

namespace nbdsched::sched::bfq {

inline constexpr int kServiceShift = 22;   // WFQ_SERVICE_SHIFT

// Virtual-time length of `service` sectors at `weight`. Inline, like
// vtime_after: both run several times per request.
inline std::uint64_t vdelta(std::uint64_t service, std::uint64_t weight) {
    return (service << kServiceShift) / (weight ? weight : 1);
}

// Virtual time `a` is after `b`. Virtual times wrap at 2^64 (the root tree
// advances by service << 22 / wsum: 2 PiB per unit of weight sum, or minutes
// of max_budget-sized time charges at weight 1), so, as the kernel's bfq_gt,
// this compares the signed difference: right as long as the timestamps
// compared are within 2^63 of each other, which live ones are.
inline bool vtime_after(std::uint64_t a, std::uint64_t b) { return static_cast<std::int64_t>(a - b) > 0; }

struct Entity {
    enum class Where : std::uint8_t { none,
                                      active,
                                      idle };

    std::uint64_t key = 0;   // unique within its tree; tie-breaker
    unsigned weight = 100;
    std::uint64_t start = 0;     // virtual start time
    std::uint64_t finish = 0;    // virtual finish time
    std::uint64_t budget = 0;    // sectors this entity may receive when served
    std::uint64_t service = 0;   // sectors received since it was put in service
    Where where = Where::none;
    bool in_service = false;

    // Backlogged: waiting in a tree or in service.
    bool busy() const { return in_service || where == Where::active; }
};

class ServiceTree {
public:
    // `pool` holds the tree nodes: entities move between the trees on every
    // activation and expiry.
    explicit ServiceTree(std::pmr::memory_resource* pool = std::pmr::get_default_resource()) : idle_(pool) {}

    // Entity becomes backlogged. `backshift` is the kernel's
    // non_blocking_wait_rq: the entity was expired only because it waited
    // for its next request, so it may start from its old finish time.
    void activate(Entity& e, bool backshift = false);
    // The in-service entity stays backlogged: it is charged the service it
    // got (finish = start + service/weight; start = finish) and re-enters
    // with its (new) budget.
    void requeue(Entity& e);
    // Entity has nothing left. If its finish is still ahead of vtime it is
    // remembered on the idle tree (and keeps counting in wsum), so that it
    // cannot gain by going idle and coming back (bfq_idle_insert).
    void deactivate(Entity& e);
    // The in-service entity, with no other active one in this tree, ends its
    // service and is served again at once: the same timestamps and virtual
    // time as deactivate(e), activate(e, backshift) and select(), without
    // passing through the idle tree or the active list.
    void restart_alone(Entity& e, bool backshift);
    // Forgets the entity entirely (its queue or group is going away).
    void remove(Entity& e);
    // Re-weighting takes effect for the next timestamps (as the kernel does
    // at the next activation); wsum is adjusted at once.
    void reweight(Entity& e, unsigned weight);

    // Entity that select() would return, without changing anything.
    Entity* peek() const;
    // Chooses the next entity to serve and marks it in service.
    Entity* select();
    // `sectors` of service went to an entity of this tree: the in-service
    // one, or (injection) a waiting one, which then moves along its schedule
    // as if it had been served: start and finish advance by the service.
    void served(Entity& e, std::uint64_t sectors);
    // Eligible waiting entities (start <= vtime), smallest finish first: the
    // order in which B-WF2Q+ would serve them now.
    std::vector<Entity*> eligible() const;

    // No backlogged entity besides the one in service.
    bool empty() const { return active_.empty(); }
    std::size_t active_count() const { return active_.size(); }
    std::uint64_t vtime() const { return vtime_; }
    std::uint64_t wsum() const { return wsum_; }

private:
    std::uint64_t min_start() const;
    Entity* first_eligible(std::uint64_t vtime) const;
    void forget_idle();
    // finish = start + budget / weight, moved with start out of the past if
    // back-shifted there (activate, restart_alone).
    void set_finish(Entity& e, bool backshifted);
    // vtime to the smallest start when nobody is eligible yet (select,
    // restart_alone).
    void jump_vtime(std::uint64_t start);
    void insert_active(Entity& e);
    void erase_active(const Entity& e);

    std::uint64_t vtime_ = 0;
    std::uint64_t wsum_ = 0;        // weights of active and idle-tree entities
    std::vector<Entity*> active_;   // sorted by key; keeps its capacity
    // (finish, key), finish compared with vtime_after: an idle entity's
    // finish does not change until it leaves, and all of them are ahead of
    // vtime by less than 2^63, so the order holds across the wrap.
    struct IdleOrder {
        bool operator()(const std::pair<std::uint64_t, std::uint64_t>& a,
                        const std::pair<std::uint64_t, std::uint64_t>& b) const;
    };
    std::pmr::map<std::pair<std::uint64_t, std::uint64_t>, Entity*, IdleOrder> idle_;
};

}   // namespace nbdsched::sched::bfq
