#include "readahead/streams.hpp"

#include <algorithm>

namespace nbdsched::readahead {

StreamTable::StreamTable(std::uint64_t max_window, unsigned streams_per_queue, std::uint64_t device_size)
    : max_window_(max_window), per_queue_(std::max(1u, streams_per_queue)), device_size_(device_size) {
}

StreamTable::Stream* StreamTable::find(std::vector<Stream>& streams, std::uint64_t offset) {
    for (auto& s : streams)
        if (offset == s.next || (offset > s.next && offset < s.ra_end))
            return &s;
    return nullptr;
}

std::optional<Range> StreamTable::on_read(std::uint64_t queue, std::uint64_t offset, std::uint64_t length,
                                          bool served) {
    if (max_window_ == 0 || length == 0)
        return std::nullopt;
    auto& streams = queues_[queue];
    const std::uint64_t end = offset + length;
    Stream* s = find(streams, offset);
    if (s == nullptr) {
        if (streams.size() < per_queue_) {
            s = &streams.emplace_back();
        } else {
            s = &*std::min_element(streams.begin(), streams.end(),
                                   [](const Stream& a, const Stream& b) { return a.last_use < b.last_use; });
            *s = Stream{};
        }
        s->next = end;
        s->ra_end = end;
        s->window = std::clamp<std::uint64_t>(4 * length, std::min<std::uint64_t>(16 << 10, max_window_),
                                              max_window_);
        s->last_use = ++clock_;
        s->reads = 1;
        return std::nullopt;
    }
    s->last_use = ++clock_;
    ++s->reads;
    bool grow = true;
    if (!served && end <= s->ra_end) {
        // What we prefetched is gone before it was read: evicted (the cache
        // is too small for all streams: thrashing) or dropped by a write.
        // Start again from here with half the window, as the kernel does.
        s->ra_end = end;
        s->window = std::max(s->window / 2, std::min(length, max_window_));
        grow = false;
    }
    s->next = std::max(s->next, end);
    s->ra_end = std::max(s->ra_end, s->next);
    if (s->ra_end >= device_size_ || s->ra_end - s->next > s->window / 2)
        return std::nullopt;
    const Range r{s->ra_end, std::min(s->window, device_size_ - s->ra_end)};
    s->ra_end = r.end();
    if (grow)
        s->window = std::min(s->window * 2, max_window_);
    return r;
}

void StreamTable::issued(std::uint64_t queue, const Range& requested, std::uint64_t reached) {
    if (reached >= requested.end())
        return;
    auto it = queues_.find(queue);
    if (it == queues_.end())
        return;
    for (auto& s : it->second)
        if (s.ra_end == requested.end()) {
            s.ra_end = std::max(reached, s.next);
            s.window = std::min(s.window, requested.length);
            return;
        }
}

void StreamTable::forget(std::uint64_t queue) {
    queues_.erase(queue);
}

void StreamTable::reset(std::uint64_t device_size) {
    queues_.clear();
    device_size_ = device_size;
}

std::size_t StreamTable::stream_count(std::uint64_t queue) const {
    auto it = queues_.find(queue);
    return it == queues_.end() ? 0 : it->second.size();
}

}   // namespace nbdsched::readahead
