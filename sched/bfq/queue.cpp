#include "sched/bfq/queue.hpp"
#include "sched/bfq/constants.hpp"

#include <algorithm>
#include <cassert>
#include <utility>

namespace nbdsched::sched::bfq {
namespace {

constexpr std::uint64_t kSeekThr = 8 * 100;   // BFQQ_SEEK_THR (sectors)
constexpr unsigned kSeekyHistory = 19;        // BFQQ_SEEKY: > 19 of 32
constexpr std::uint64_t kTtimeValid = 80;     // bfq_sample_valid()

std::uint64_t sector(const Request& r) { return r.offset / 512; }

}   // namespace

BfqQueue::BfqQueue(std::uint64_t key, QueueId client, GroupId group, bool sync,
                   std::pmr::memory_resource* pool)
    : key_(key), client_(client), group_(group), sync_(sync), queued_(pool), short_ttime_(sync) {
    entity.key = key;
}

BfqQueue::Queued::iterator BfqQueue::find(SortKey key) {
    auto it = queued_.first_not_before(key);
    assert(it != queued_.end() && sort_key(it->request) == key);
    return it;
}

[[gnu::hot]] void BfqQueue::add(const Request& request, Time now) {
    queued_.insert(QueuedRequest{request, now});
    if (!next_from_fifo_) next_.reset();   // the elevator may prefer the newcomer
}

[[gnu::hot]] Request BfqQueue::take(const Request& queued) {
    auto it = queued_.size() == 1 ? queued_.begin() : queued_.first_not_before(sort_key(queued));
    assert(it != queued_.end() && sort_key(it->request) == sort_key(queued));
    Request r = it->request;
    queued_.erase(it);
    next_.reset();
    next_from_fifo_ = false;
    return r;
}

[[gnu::hot]] const Request* BfqQueue::next_request(std::uint64_t head, const SeekPolicy& seek,
                                                   Nanos fifo_expire, Time now) {
    if (queued_.empty()) return nullptr;
    if (queued_.size() == 1) return &only_request(fifo_expire, now);
    if (next_) return &find(*next_)->request;
    if (!fifo_checked_) {
        fifo_checked_ = true;
        auto oldest = std::min_element(queued_.begin(), queued_.end(), [](const auto& a, const auto& b) {
            return std::pair(a.enqueued, a.request.id) < std::pair(b.enqueued, b.request.id);
        });
        if (now >= oldest->enqueued + fifo_expire) {
            next_ = sort_key(oldest->request);
            next_from_fifo_ = true;
            return &oldest->request;
        }
    }
    // bfq_choose_req between the nearest request ahead of the head and the
    // nearest one behind it: backward seeks within back_seek_max cost
    // back_seek_penalty times their distance; beyond it they "wrap".
    auto fwd = queued_.first_not_before({head, 0});
    const bool have_fwd = fwd != queued_.end();
    bool have_back = false;
    std::uint64_t d_back = 0;
    auto back = fwd;
    if (fwd != queued_.begin()) {
        --back;
        if (sector(back->request) + seek.back_max_sectors >= head) {
            have_back = true;
            d_back = (head - sector(back->request)) * seek.back_penalty;
        }
    }
    auto pick = queued_.begin();   // both wrapped: the one furthest behind
    if (have_fwd && have_back) pick = d_back < sector(fwd->request) - head ? back : fwd;
    else if (have_fwd) pick = fwd;
    else if (have_back) pick = back;
    next_ = sort_key(pick->request);
    return &pick->request;
}

[[gnu::hot]] void BfqQueue::note_arrival(const Request& request, Time now, bool nonrot, Nanos slice_idle) {
    // Think time: only when the queue had nothing queued or in flight, i.e.
    // how long the client took to come back after being fully served.
    if (dispatched == 0 && empty() && last_end_request_ != Time{}) {
        auto elapsed = std::min<std::uint64_t>(std::uint64_t((now - last_end_request_).count()),
                                               2 * std::uint64_t(slice_idle.count()));
        ttime_samples_ = (7 * ttime_samples_ + 256) / 8;
        ttime_total_ = (7 * ttime_total_ + 256 * elapsed) / 8;
        ttime_mean_ = (ttime_total_ + 128) / ttime_samples_;
    }
    update_short_ttime(slice_idle);
    // Seek history (BFQ_RQ_SEEKY): far from the previous request and, on
    // non-rotational devices, small (large random requests are not seeky).
    std::uint64_t pos = sector(request);
    std::uint64_t dist = last_request_pos_ == 0 ? 0
                                                : (pos > last_request_pos_ ? pos - last_request_pos_ : last_request_pos_ - pos);
    bool rq_seeky = dist > kSeekThr && (!nonrot || request.sectors() < kSectThrNonrot);
    seek_history_.add(rq_seeky);
    last_request_pos_ = pos + request.sectors();
}

[[gnu::hot]] void BfqQueue::update_short_ttime(Nanos slice_idle) {
    // bfq_update_has_short_ttime: not maintained when no idling can happen.
    if (!sync_ || slice_idle.count() == 0) return;
    short_ttime_ = !(closed || (ttime_samples_ > kTtimeValid &&
                                ttime_mean_ > std::uint64_t(slice_idle.count()) / 2));
}

[[gnu::hot]] bool BfqQueue::seeky() const { return seek_history_.seeky(kSeekyHistory); }

bool BfqQueue::seeky_so_far() const { return seek_history_.seeky_so_far(kSeekyHistory); }

}   // namespace nbdsched::sched::bfq
