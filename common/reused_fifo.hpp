// A first-in first-out queue in one vector whose capacity is reused: once
// it has held its most, pushing and popping allocate nothing (a std::deque
// allocates a block every few hundred bytes that pass through it, which a
// request path pays per request).
#pragma once

#include <cstddef>
#include <iterator>
#include <utility>
#include <vector>

namespace nbdsched::common {

template <class T>
class ReusedFifo {
public:
    void push_back(T item) { items_.push_back(std::move(item)); }
    bool empty() const { return head_ == items_.size(); }
    std::size_t size() const { return items_.size() - head_; }
    T& front() { return items_[head_]; }
    const T& front() const { return items_[head_]; }
    // The front is compacted away once it is the larger part: the vector
    // neither grows without end nor moves its items at every pop.
    void pop_front() {
        if (++head_ == items_.size()) {
            clear();
        } else if (head_ > items_.size() / 2) {
            items_.erase(items_.begin(), items_.begin() + static_cast<std::ptrdiff_t>(head_));
            head_ = 0;
        }
    }
    void clear() {
        items_.clear();
        head_ = 0;
    }
    auto begin() { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
    auto end() { return items_.end(); }
    auto begin() const { return items_.begin() + static_cast<std::ptrdiff_t>(head_); }
    auto end() const { return items_.end(); }

private:
    std::vector<T> items_;
    std::size_t head_ = 0;
};

}   // namespace nbdsched::common
