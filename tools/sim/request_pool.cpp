#include "tools/sim/request_pool.hpp"

namespace nbdsched::sim {

RequestPool::RequestPool(const PoolSpec& spec, std::size_t jobs) : spec_(spec), procs_(jobs) {}

bool RequestPool::batching(const Proc& p, Nanos now) const {
    return p.batch_left == spec_.batch_requests || (p.batch_left > 0 && now < p.last_waited + spec_.batch_time);
}

void RequestPool::set_batching(Proc& p, Nanos now) {
    if (batching(p, now)) return;
    p.batch_left = spec_.batch_requests;
    p.last_waited = now;
}

void RequestPool::sleep(std::size_t job) {
    line_.push_back(job);   // prepare_to_wait_exclusive: at the tail
    ++sleeps_;
}

bool RequestPool::get(std::size_t job, Nanos now) {
    switch (spec_.mode) {
    case PoolSpec::Mode::unlimited: ++count_; return true;
    case PoolSpec::Mode::line: {
        Proc& p = procs_[job];
        if (p.ticket) {   // the slot is counted already
            p.ticket = false;
            return true;
        }
        if (count_ < spec_.nr_requests && line_.empty()) {
            ++count_;
            return true;
        }
        sleep(job);
        return false;
    }
    case PoolSpec::Mode::batching: return get_batching(job, now);
    }
    return false;
}

// __get_request for a sync request (the scheduler never refuses: ELV_MQUEUE_MAY).
bool RequestPool::get_batching(std::size_t job, Nanos now) {
    Proc& p = procs_[job];
    if (count_ + 1 >= spec_.nr_requests) {
        // This allocation fills the pool: the first to fill it becomes a
        // batcher; later ones need to be batchers already.
        if (!full_) {
            set_batching(p, now);
            full_ = true;
        } else if (!batching(p, now)) {
            sleep(job);
            return false;
        }
    }
    if (count_ >= 3 * spec_.nr_requests / 2) {   // even batchers stop at 150%
        sleep(job);
        return false;
    }
    ++count_;
    if (batching(p, now)) --p.batch_left;
    return true;
}

std::optional<std::size_t> RequestPool::put(Nanos now) {
    if (count_ > 0) --count_;
    if (spec_.mode == PoolSpec::Mode::unlimited) return std::nullopt;
    if (spec_.mode == PoolSpec::Mode::line) {
        if (line_.empty()) return std::nullopt;
        std::size_t job = line_.front();
        line_.pop_front();
        procs_[job].ticket = true;
        ++count_;   // the ticket holds the slot
        return job;
    }
    // __freed_request: wake one sleeper once the pool is below nr_requests.
    if (count_ + 1 > spec_.nr_requests) return std::nullopt;
    full_ = false;
    if (line_.empty()) return std::nullopt;
    std::size_t job = line_.front();
    line_.pop_front();
    set_batching(procs_[job], now);   // get_request after io_schedule()
    return job;
}

}   // namespace nbdsched::sim
