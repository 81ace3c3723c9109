#include "sched/bfq/queue.hpp"
#include "sched/bfq/constants.hpp"

#include <algorithm>

namespace nbdsched::sched::bfq {
namespace {

constexpr std::uint64_t kSeekThr = 8 * 100;   // BFQQ_SEEK_THR (sectors)
constexpr unsigned kSeekyHistory = 19;        // BFQQ_SEEKY: > 19 of 32
constexpr std::uint64_t kTtimeValid = 80;     // bfq_sample_valid()

std::uint64_t sector(const Request& r) { return r.offset / 512; }

}   // namespace

BfqQueue::BfqQueue(std::uint64_t key, QueueId client, GroupId group, bool sync,
                   std::pmr::memory_resource* pool)
    : key_(key), client_(client), group_(group), sync_(sync), requests_(pool), by_sector_(pool),
      fifo_(pool), short_ttime_(sync) {
    entity.key = key;
}

void BfqQueue::add(const Request& request, Time now) {
    if (empty()) {
        lone_ = QueuedRequest{request, now};
    } else {
        if (lone_) {
            index(*lone_);
            lone_.reset();
        }
        index(QueuedRequest{request, now});
    }
    if (!next_from_fifo_) next_.reset();   // the elevator may prefer the newcomer
}

void BfqQueue::index(const QueuedRequest& q) {
    requests_[q.request.id] = q;
    by_sector_.emplace(sector(q.request), q.request.id);
    fifo_.emplace(q.enqueued, q.request.id);
}

Request BfqQueue::take(RequestId id) {
    if (lone_ && lone_->request.id == id) {
        Request r = lone_->request;
        lone_.reset();
        next_.reset();
        next_from_fifo_ = false;
        return r;
    }
    auto it = requests_.find(id);
    QueuedRequest q = it->second;
    requests_.erase(it);
    by_sector_.erase({sector(q.request), id});
    fifo_.erase({q.enqueued, id});
    next_.reset();
    next_from_fifo_ = false;
    return q.request;
}

const Request* BfqQueue::next_request(std::uint64_t head, const SeekPolicy& seek,
                                      Nanos fifo_expire, Time now) {
    if (lone_) {
        // What the code below decides for one request: it is the FIFO head
        // and the elevator's only choice; only next_from_fifo_ depends on
        // which of the two picked it.
        if (!next_ && !fifo_checked_) {
            fifo_checked_ = true;
            if (now >= lone_->enqueued + fifo_expire) next_from_fifo_ = true;
        }
        next_ = lone_->request.id;
        return &lone_->request;
    }
    if (requests_.empty()) return nullptr;
    if (next_) return &requests_.at(*next_).request;
    if (!fifo_checked_) {
        fifo_checked_ = true;
        auto [enq, id] = *fifo_.begin();
        if (now >= enq + fifo_expire) {
            next_ = id;
            next_from_fifo_ = true;
            return &requests_.at(id).request;
        }
    }
    // bfq_choose_req between the nearest request ahead of the head and the
    // nearest one behind it: backward seeks within back_seek_max cost
    // back_seek_penalty times their distance; beyond it they "wrap".
    auto fwd = by_sector_.lower_bound({head, 0});
    const bool have_fwd = fwd != by_sector_.end();
    bool have_back = false;
    std::uint64_t d_back = 0;
    auto back = fwd;
    if (fwd != by_sector_.begin()) {
        --back;
        if (back->first + seek.back_max_sectors >= head) {
            have_back = true;
            d_back = (head - back->first) * seek.back_penalty;
        }
    }
    auto pick = by_sector_.begin();   // both wrapped: the one furthest behind
    if (have_fwd && have_back) pick = d_back < fwd->first - head ? back : fwd;
    else if (have_fwd) pick = fwd;
    else if (have_back) pick = back;
    next_ = pick->second;
    return &requests_.at(pick->second).request;
}

void BfqQueue::note_arrival(const Request& request, Time now, bool nonrot, Nanos slice_idle) {
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

void BfqQueue::update_short_ttime(Nanos slice_idle) {
    // bfq_update_has_short_ttime: not maintained when no idling can happen.
    if (!sync_ || slice_idle.count() == 0) return;
    short_ttime_ = !(closed || (ttime_samples_ > kTtimeValid &&
                                ttime_mean_ > std::uint64_t(slice_idle.count()) / 2));
}

bool BfqQueue::seeky() const { return seek_history_.seeky(kSeekyHistory); }

bool BfqQueue::seeky_so_far() const { return seek_history_.seeky_so_far(kSeekyHistory); }

}   // namespace nbdsched::sched::bfq
