// An array kept in the order of a key read off each element: how bfq's and
// cfq's queues hold their pending requests in sector order. A queue holds at
// most its client's requests in flight (256 a connection by default), where
// a binary search and a short move cost less than a tree node in and out per
// request; and a client that writes or reads sequentially appends, which
// needs no search at all.
#pragma once

#include <algorithm>
#include <iterator>
#include <memory_resource>
#include <type_traits>
#include <vector>

namespace nbdsched::sched {

// KeyOf: a stateless callable, KeyOf{}(const T&) -> a key ordered by `<`.
// Keys are unique (each scheduler breaks equal sectors by id or arrival).
template <class T, class KeyOf>
class SortedArray {
public:
    using Items = std::pmr::vector<T>;
    using iterator = typename Items::iterator;
    using const_iterator = typename Items::const_iterator;
    using Key = std::invoke_result_t<KeyOf, const T&>;

    explicit SortedArray(std::pmr::memory_resource* pool) : items_(pool) {}

    // Puts `item` in its place: past the last key without a search.
    iterator insert(const T& item);
    // The first element whose key is not below `key`.
    iterator first_not_before(const Key& key);
    iterator erase(iterator at) { return items_.erase(at); }
    void clear() { items_.clear(); }

    bool empty() const { return items_.empty(); }
    std::size_t size() const { return items_.size(); }
    T& front() { return items_.front(); }
    iterator begin() { return items_.begin(); }
    iterator end() { return items_.end(); }
    const_iterator begin() const { return items_.begin(); }
    const_iterator end() const { return items_.end(); }

private:
    Items items_;
};

// Hot (DEVELOPERS.md, Style): on every request's path in both schedulers.
template <class T, class KeyOf>
[[gnu::hot]] typename SortedArray<T, KeyOf>::iterator SortedArray<T, KeyOf>::insert(const T& item) {
    const Key key = KeyOf{}(item);
    if (items_.empty() || KeyOf{}(items_.back()) < key) {
        items_.push_back(item);
        return std::prev(items_.end());
    }
    return items_.insert(first_not_before(key), item);
}

template <class T, class KeyOf>
[[gnu::hot]] typename SortedArray<T, KeyOf>::iterator SortedArray<T, KeyOf>::first_not_before(const Key& key) {
    return std::lower_bound(items_.begin(), items_.end(), key,
                            [](const T& item, const Key& k) { return KeyOf{}(item) < k; });
}

}   // namespace nbdsched::sched
