#include "sched/bfq/wf2q.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {

namespace {
bool later(std::uint64_t a, std::uint64_t b) { return vtime_after(a, b); }
}   // namespace

bool ServiceTree::IdleOrder::operator()(const std::pair<std::uint64_t, std::uint64_t>& a,
                                        const std::pair<std::uint64_t, std::uint64_t>& b) const {
    if (a.first != b.first) return later(b.first, a.first);
    return a.second < b.second;
}

namespace {
bool key_less(const Entity* e, std::uint64_t key) { return e->key < key; }
}   // namespace

void ServiceTree::insert_active(Entity& e) {
    e.where = Entity::Where::active;
    // Keys are unique in a tree and an entity is inserted only when it is
    // not active, so this never finds an equal key.
    active_.insert(std::lower_bound(active_.begin(), active_.end(), e.key, key_less), &e);
}

void ServiceTree::erase_active(const Entity& e) {
    auto it = std::lower_bound(active_.begin(), active_.end(), e.key, key_less);
    if (it != active_.end() && (*it)->key == e.key) active_.erase(it);
}

void ServiceTree::activate(Entity& e, bool backshift) {
    if (e.in_service || e.where == Entity::Where::active) return;
    std::uint64_t min_vstart = vtime_;
    bool backshifted = false;
    if (backshift && later(vtime_, e.finish)) {
        backshifted = true;
        min_vstart = e.finish;
    }
    if (e.where == Entity::Where::idle) {
        // Coming back from the idle tree: no earlier than its old finish.
        idle_.erase({e.finish, e.key});
        e.start = later(min_vstart, e.finish) ? min_vstart : e.finish;
    } else {
        e.start = min_vstart;
        wsum_ += e.weight;
    }
    set_finish(e, backshifted);
    insert_active(e);
}

[[gnu::hot]] void ServiceTree::set_finish(Entity& e, bool backshifted) {
    e.finish = e.start + vdelta(e.budget, e.weight);
    if (backshifted && later(vtime_, e.finish)) {
        // bfq_update_fin_time_enqueue: do not let a back-shifted entity end
        // up entirely in the past, it would monopolise the device.
        std::uint64_t delta = vtime_ - e.finish;
        e.start += delta;
        e.finish += delta;
    }
}

void ServiceTree::requeue(Entity& e) {
    if (e.in_service) {
        e.finish = e.start + vdelta(e.service, e.weight);
        e.start = e.finish;
        e.in_service = false;
        e.service = 0;
    } else if (e.where == Entity::Where::active) {
        erase_active(e);
    } else {
        activate(e);
        return;
    }
    e.finish = e.start + vdelta(e.budget, e.weight);
    insert_active(e);
}

void ServiceTree::deactivate(Entity& e) {
    if (e.in_service) {
        e.finish = e.start + vdelta(e.service, e.weight);
        e.in_service = false;
        e.service = 0;
    } else if (e.where == Entity::Where::active) {
        erase_active(e);
    } else {
        return;   // already idle or not in this tree
    }
    if (later(e.finish, vtime_)) {
        e.where = Entity::Where::idle;
        idle_.emplace(std::pair{e.finish, e.key}, &e);
    } else {
        e.where = Entity::Where::none;
        wsum_ -= e.weight;
    }
}

[[gnu::hot]] void ServiceTree::restart_alone(Entity& e, bool backshift) {
    // deactivate(): the finish its service reached. activate(): from there
    // if it is still ahead of vtime (the idle tree's case) or back-shifted,
    // else from vtime; wsum loses and regains its weight, or keeps it.
    const std::uint64_t reached = e.start + vdelta(e.service, e.weight);
    const bool backshifted = backshift && later(vtime_, reached);
    e.start = later(reached, vtime_) || backshifted ? reached : vtime_;
    set_finish(e, backshifted);
    // select(): it is the only candidate.
    jump_vtime(e.start);
    e.service = 0;
}

void ServiceTree::remove(Entity& e) {
    if (e.in_service || e.where == Entity::Where::active) deactivate(e);
    if (e.where == Entity::Where::idle) {
        idle_.erase({e.finish, e.key});
        wsum_ -= e.weight;
        e.where = Entity::Where::none;
    }
}

void ServiceTree::reweight(Entity& e, unsigned weight) {
    weight = std::max(weight, 1u);
    if (e.in_service || e.where != Entity::Where::none) wsum_ = wsum_ - e.weight + weight;
    e.weight = weight;
}

[[gnu::hot]] void ServiceTree::jump_vtime(std::uint64_t start) {
    if (!later(start, vtime_)) return;
    vtime_ = start;   // bfq_calc_vtime_jump: nobody eligible yet
    forget_idle();
}

[[gnu::hot]] void ServiceTree::forget_idle() {
    // bfq_forget_idle: entities whose finish time vtime has passed can no
    // longer gain anything by coming back, so they stop weighing on vtime.
    // They are the front of the idle tree; the rest stays.
    while (!idle_.empty() && !later(idle_.begin()->first.first, vtime_)) {
        Entity& e = *idle_.begin()->second;
        e.where = Entity::Where::none;
        wsum_ -= e.weight;
        idle_.erase(idle_.begin());
    }
}

std::uint64_t ServiceTree::min_start() const {
    // Only called with active entities.
    std::uint64_t m = active_.front()->start;
    for (const Entity* e : active_)
        if (later(m, e->start)) m = e->start;
    return m;
}

Entity* ServiceTree::first_eligible(std::uint64_t vtime) const {
    Entity* best = nullptr;
    for (Entity* e : active_) {
        if (later(e->start, vtime)) continue;
        if (!best || later(best->finish, e->finish)) best = e;
    }
    return best;
}

std::vector<Entity*> ServiceTree::eligible() const {
    std::vector<Entity*> out;
    for (Entity* e : active_)
        if (!later(e->start, vtime_)) out.push_back(e);
    std::stable_sort(out.begin(), out.end(), [](const Entity* a, const Entity* b) { return later(b->finish, a->finish); });
    return out;
}

Entity* ServiceTree::peek() const {
    if (active_.empty()) return nullptr;
    std::uint64_t jump = min_start();
    return first_eligible(later(jump, vtime_) ? jump : vtime_);
}

Entity* ServiceTree::select() {
    if (active_.empty()) return nullptr;
    jump_vtime(min_start());
    Entity* e = first_eligible(vtime_);
    if (!e) return nullptr;   // cannot happen: the min-start entity is eligible
    erase_active(*e);
    e->where = Entity::Where::none;
    e->in_service = true;
    e->service = 0;
    return e;
}

[[gnu::hot]] void ServiceTree::served(Entity& e, std::uint64_t sectors) {
    if (e.in_service) {
        e.service += sectors;
    } else if (e.where == Entity::Where::active) {
        std::uint64_t d = vdelta(sectors, e.weight);
        e.start += d;
        e.finish += d;
    }
    if (wsum_ > 0) vtime_ += vdelta(sectors, wsum_);
    forget_idle();
}

}   // namespace nbdsched::sched::bfq
