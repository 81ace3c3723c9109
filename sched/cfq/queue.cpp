#include "sched/cfq/queue.hpp"

#include <algorithm>
#include <cassert>

#include "sched/cfq/constants.hpp"

namespace nbdsched::sched::cfq {

namespace {

// cfq_choose_req() for two different requests: true to serve `a` first.
// It works on the requests, and its callers copy the chosen iterator: passed
// and returned as std::optional, the iterators went through the stack in a
// way that stalled store forwarding twice per request (an eighth of cfq's
// time on a RAM device).
bool first_is_better(const CfqQueue::Pending& a, const CfqQueue::Pending& b, std::uint64_t last,
                     const ElevatorParams& e) {
    const Request& r1 = a.req;
    const Request& r2 = b.req;
    if (r1.sync != r2.sync) return r1.sync;
    // (REQ_PRIO is not modelled.)
    const std::uint64_t s1 = a.sector(), s2 = b.sector();
    std::uint64_t d1 = 0, d2 = 0;
    bool wrap1 = false, wrap2 = false;
    // Strict one-way elevator, except short backward seeks that cost
    // back_penalty times a forward seek of the same distance.
    if (s1 >= last) d1 = s1 - last;
    else if (s1 + e.back_max_sectors >= last) d1 = (last - s1) * e.back_penalty;
    else wrap1 = true;
    if (s2 >= last) d2 = s2 - last;
    else if (s2 + e.back_max_sectors >= last) d2 = (last - s2) * e.back_penalty;
    else wrap2 = true;

    if (!wrap1 && !wrap2) {
        if (d1 < d2) return true;
        if (d2 < d1) return false;
        return s1 >= s2;
    }
    if (wrap2 && !wrap1) return true;
    if (wrap1 && !wrap2) return false;
    // Both behind the head: start with the one furthest behind (one back seek).
    return s1 <= s2;
}

}   // namespace

CfqQueue::CfqQueue(std::uint64_t key_, std::optional<QueueId> client_, CfqGroup* group_,
                   bool sync_, Time now, std::pmr::memory_resource* pool)
    : key(key_), client(client_), group(group_), sync(sync_), slots(pool), free_slots(pool), sorted(pool) {
    idle_window = sync;   // cfq_init_cfqq: sync queues start with an idle window
    ttime.last_end_request = now;
}

[[gnu::hot]] void CfqQueue::add(const Request& req, Time fifo_time, std::uint64_t last_position,
                                const ElevatorParams& e) {
    Entry entry{{req.offset / 512, arrivals++}, 0};
    if (free_slots.empty()) {
        entry.slot = std::uint32_t(slots.size());
        slots.push_back(Pending{req, fifo_time});
    } else {
        entry.slot = free_slots.back();
        free_slots.pop_back();
        slots[entry.slot] = Pending{req, fifo_time};
    }
    // The newest arrival sorts after every equal sector.
    sorted.insert(entry);
    // cfq_choose_req(next_rq, it): the newcomer, unless the old choice is better.
    if (!next_rq || !first_is_better(*next(), slots[entry.slot], last_position, e)) next_rq = entry;
}

[[gnu::hot]] Request CfqQueue::remove_for_dispatch(Entry which, const ElevatorParams& e) {
    // cfq_dispatch_insert() -> cfq_find_next_rq(): the neighbours of the
    // dispatched request in sector order (wrapping to the first), chosen by
    // the elevator from that request's position.
    auto pos = sorted.first_not_before(which.place);
    assert(pos != sorted.end() && pos->slot == which.slot);
    const Entry* next = nullptr;
    const Entry* prev = nullptr;
    if (pos != sorted.begin()) prev = &*std::prev(pos);
    if (std::next(pos) != sorted.end()) next = &*std::next(pos);
    else if (sorted.begin() != pos) next = &*sorted.begin();
    // cfq_choose_req(next, prev): either one alone, prev when both are the same.
    const Entry* chosen = next && prev && next != prev
                              ? (first_is_better(at(*next), at(*prev), which.place.sector, e) ? next : prev)
                          : next && !prev ? next
                                          : prev;
    next_rq = chosen ? std::optional(*chosen) : std::nullopt;
    Request req = slots[which.slot].req;
    sorted.erase(pos);
    if (sorted.empty()) {   // start again from slot 0
        slots.clear();
        free_slots.clear();
    } else {
        free_slots.push_back(which.slot);
    }
    return req;
}

[[gnu::hot]] std::optional<CfqQueue::Entry> CfqQueue::check_fifo(Time now) {
    if (fifo_expire) return std::nullopt;
    fifo_expire = true;
    if (sorted.empty()) return std::nullopt;
    auto head = std::min_element(sorted.begin(), sorted.end(),
                                 [](const Entry& a, const Entry& b) { return a.place.arrival < b.place.arrival; });
    if (now < at(*head).fifo_time) return std::nullopt;
    return *head;
}

[[gnu::hot]] void CfqQueue::update_seek(const Request& req, bool rotational) {
    const std::uint64_t pos = req.offset / 512;
    std::uint64_t sdist = 0;
    if (last_request_pos)
        sdist = last_request_pos < pos ? pos - last_request_pos : last_request_pos - pos;
    // On flash a small request is what costs: it counts as a seek.
    seek_history.add(rotational ? sdist > kSeekThr : req.sectors() < kSectThrNonrot);
}

bool CfqQueue::seeky() const { return seek_history.seeky(kSeekyHistory); }

bool CfqQueue::seeky_so_far() const { return seek_history.seeky_so_far(kSeekyHistory); }

}   // namespace nbdsched::sched::cfq
