// The events of a virtual-time rig in time order, those due at the same
// time in the order they were added. A binary heap over one vector: the
// rigs kept their events and per-request records in std::map and std::set,
// and under ASan (whose CI build compiles test code at -O0) those tree
// nodes were most of the scheduler tests' run time, not the schedulers.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "sched/request.hpp"

namespace schedtest {

template <typename Event>
class EventQueue {
public:
    void push(nbdsched::sched::Time at, Event event) {
        heap_.push_back(Entry{at, next_seq_++, std::move(event)});
        std::push_heap(heap_.begin(), heap_.end(), later);
    }
    bool empty() const { return heap_.empty(); }
    nbdsched::sched::Time next_time() const { return heap_.front().at; }   // not empty
    Event pop() {                                                          // the next one; not empty
        std::pop_heap(heap_.begin(), heap_.end(), later);
        Event event = std::move(heap_.back().event);
        heap_.pop_back();
        return event;
    }

private:
    struct Entry {
        nbdsched::sched::Time at;
        std::uint64_t seq;
        Event event;
    };
    // std::push_heap keeps the greatest first: "later" puts the earliest there.
    static bool later(const Entry& a, const Entry& b) { return a.at != b.at ? a.at > b.at : a.seq > b.seq; }
    std::vector<Entry> heap_;
    std::uint64_t next_seq_ = 0;
};

}   // namespace schedtest
