#include "tools/sim/request_pool.hpp"

namespace nbdsched::sim {

RequestPool::RequestPool(const PoolSpec& spec, std::size_t jobs)
    : spec_(spec), admission_(spec.nr_requests, spec.fair_share, spec.share_idle, jobs), procs_(jobs) {}

void RequestPool::set_group(std::size_t job, sched::GroupId group, unsigned weight) {
    admission_.set_group(job, group, weight);
}

bool RequestPool::line_mode() const { return spec_.mode == PoolSpec::Mode::line; }

unsigned RequestPool::allocated() const { return line_mode() ? admission_.allocated() : count_; }

std::size_t RequestPool::sleeping() const { return line_mode() ? admission_.sleeping() : line_.size(); }

std::uint64_t RequestPool::sleeps() const { return line_mode() ? admission_.sleeps() : sleeps_; }

std::vector<std::size_t> RequestPool::woken() {
    if (line_mode()) return admission_.woken();
    std::vector<std::size_t> out;
    out.swap(woken_);
    return out;
}

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
    case PoolSpec::Mode::line: return admission_.get(job, now);
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

void RequestPool::put(std::size_t job, Nanos now) {
    if (spec_.mode == PoolSpec::Mode::line) return admission_.put(job, now);
    if (count_ > 0) --count_;
    if (spec_.mode == PoolSpec::Mode::unlimited) return;
    // __freed_request: wake one sleeper once the pool is below nr_requests.
    if (count_ + 1 > spec_.nr_requests) return;
    full_ = false;
    if (line_.empty()) return;
    std::size_t next = line_.front();
    line_.pop_front();
    set_batching(procs_[next], now);   // get_request after io_schedule()
    woken_.push_back(next);
}

}   // namespace nbdsched::sim
