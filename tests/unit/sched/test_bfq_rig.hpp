// A tiny virtual-time loop for the BFQ tests: jobs issue requests, the
// scheduler dispatches them, a fake device completes them. The device has
// `channels` parallel slots and a fixed service time per request (a
// sequential request, starting where the previous one ended, may be given
// a cheaper time to model a disk head). Everything is deterministic.
#pragma once

#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "sched/bfq/bfq.hpp"
#include "test_event_queue.hpp"

namespace bfqtest {

using namespace nbdsched::sched;
using namespace std::chrono_literals;
using nbdsched::Nanos;

struct FakeDevice {
    unsigned channels = 4;
    Nanos random_time = 100us;
    Nanos sequential_time = 100us;
};

struct Job {
    QueueId queue = 1;
    GroupId group = 0;
    bool sync = true;
    Op op = Op::read;
    bool sequential = false;
    std::uint64_t block = 4096;
    unsigned iodepth = 1;
    Nanos think{};
    std::uint64_t region = 0;   // byte offset of the job's area
    // results
    std::uint64_t done = 0, bytes = 0;
    double lat_sum = 0, lat_sq = 0;
    Nanos lat_max{};
    // state
    std::uint64_t next_off = 0, lcg = 0;
    bool retired = false;   // its client went away (Rig::replace_jobs)
};

class Rig {
public:
    Rig(std::unique_ptr<Scheduler> s, FakeDevice dev, unsigned max_depth)
        : sched_(std::move(s)), dev_(dev), depth_(max_depth), free_at_(dev.channels, Time{}) {
        REQUIRE(sched_);
    }
    Scheduler& sched() { return *sched_; }
    std::vector<Job>& jobs() { return jobs_; }

    void add(Job j) {
        j.lcg = 12345 + j.queue * 7919;
        jobs_.push_back(j);
    }

    // Runs until `until`; jobs start issuing at the first call.
    void run(Time until) {
        if (!started_) start();
        while (true) {
            drain();
            Time next = until;
            if (!completions_.empty()) next = std::min(next, completions_.next_time());
            if (!arrivals_.empty()) next = std::min(next, arrivals_.next_time());
            if (auto w = sched_->next_wakeup()) next = std::min(next, std::max(*w, now_));
            if (next >= until) {
                now_ = until;
                break;
            }
            now_ = next;
            step();
        }
    }

    // The running jobs' clients go away (their requests in flight still
    // complete) and `next` start now: new connections, as a new fio run.
    void replace_jobs(std::vector<Job> next) {
        REQUIRE(started_);
        for (Job& j : jobs_) {
            j.retired = true;
            sched_->close_queue(j.queue, now_);
        }
        for (Job& j : next) {
            j.lcg = 12345 + j.queue * 7919;
            jobs_.push_back(j);
            sched_->open_queue(j.queue, j.group, now_);
            for (unsigned d = 0; d < j.iodepth; ++d) arrivals_.push(now_, jobs_.size() - 1);
        }
    }

    // Stop issuing and let everything finish; returns the time it took.
    Time finish(Time limit) {
        stopping_ = true;
        while (sched_->queued() + sched_->in_flight() > 0 && now_ < limit) run(now_ + 10ms);
        return now_;
    }

    void reset_counts() {
        for (auto& j : jobs_) j.done = j.bytes = 0, j.lat_sum = j.lat_sq = 0, j.lat_max = {};
    }

    Time now() const { return now_; }
    std::uint64_t submitted() const { return next_id_ - 1; }
    std::uint64_t completed() const { return completed_total_; }
    unsigned max_seen_depth() const { return max_depth_seen_; }

private:
    void start() {
        started_ = true;
        for (std::size_t i = 0; i < jobs_.size(); ++i) {
            sched_->open_queue(jobs_[i].queue, jobs_[i].group, now_);
            for (unsigned d = 0; d < jobs_[i].iodepth; ++d) arrivals_.push(now_, i);
        }
    }

    void issue(std::size_t i) {
        Job& j = jobs_[i];
        Request r;
        r.id = next_id_++;
        r.queue = j.queue;
        r.group = j.group;
        r.op = j.op;
        r.sync = j.sync;
        r.length = j.block;
        if (j.sequential) {
            r.offset = j.region + j.next_off;
            j.next_off += j.block;
        } else {
            j.lcg = j.lcg * 6364136223846793005ull + 1442695040888963407ull;
            r.offset = j.region + ((j.lcg >> 33) % (1u << 20)) * j.block;
        }
        r.arrival = now_;
        requests_.push_back(Record{i, now_});
        sched_->submit(r, now_);
    }

    void drain() {
        while (auto r = sched_->dispatch(now_)) {
            // Checked on every dispatch: plain ifs keep millions of them cheap.
            if (r->id < 1 || r->id > requests_.size()) FAIL("dispatched a request never submitted: " << r->id);
            Record& rec = requests_[r->id - 1];
            if (rec.dispatched) FAIL_CHECK("dispatched twice: " << r->id);
            rec.dispatched = true;
            if (sched_->in_flight() > depth_) FAIL_CHECK("depth " << sched_->in_flight() << " > " << depth_);
            max_depth_seen_ = std::max<unsigned>(max_depth_seen_, unsigned(sched_->in_flight()));
            auto ch = std::min_element(free_at_.begin(), free_at_.end());
            bool seq = r->offset == head_;
            head_ = r->offset + r->length;
            Time begin = std::max(*ch, now_);
            *ch = begin + (seq ? dev_.sequential_time : dev_.random_time);
            completions_.push(*ch, r->id);
        }
    }

    void step() {
        while (!completions_.empty() && completions_.next_time() <= now_) {
            const RequestId id = completions_.pop();
            sched_->complete(id, now_);
            ++completed_total_;
            const Record& rec = requests_.at(id - 1);
            const std::size_t i = rec.job;
            const Time t0 = rec.submitted;
            Job& j = jobs_[i];
            double lat = double((now_ - t0).count()) / 1000.0;
            ++j.done;
            j.bytes += j.block;
            j.lat_sum += lat;
            j.lat_sq += lat * lat;
            j.lat_max = std::max(j.lat_max, now_ - t0);
            if (!stopping_ && !j.retired) arrivals_.push(now_ + j.think, i);
            drain();
        }
        while (!arrivals_.empty() && arrivals_.next_time() <= now_) {
            const std::size_t i = arrivals_.pop();
            if (!stopping_ && !jobs_[i].retired) issue(i);
        }
    }

    std::unique_ptr<Scheduler> sched_;
    FakeDevice dev_;
    unsigned depth_;
    std::vector<Time> free_at_;
    std::vector<Job> jobs_;
    // One per request submitted, at index id - 1 (ids count from 1).
    struct Record {
        std::size_t job;
        Time submitted;
        bool dispatched = false;
    };
    schedtest::EventQueue<RequestId> completions_;
    schedtest::EventQueue<std::size_t> arrivals_;   // a job's next request
    std::vector<Record> requests_;
    RequestId next_id_ = 1;
    std::uint64_t head_ = 0;
    std::uint64_t completed_total_ = 0;
    unsigned max_depth_seen_ = 0;
    Time now_{};
    bool started_ = false;
    bool stopping_ = false;
};

inline std::unique_ptr<Scheduler> make(bool rotational, unsigned depth, const Tunables& t = {}) {
    std::string err;
    auto s = make_bfq(DeviceTraits{rotational, depth}, t, err);
    INFO(err);
    REQUIRE(s);
    return s;
}

inline double iops(const Job& j, Nanos window) {
    return double(j.done) / (double(window.count()) / 1e9);
}

inline double lat_stddev_us(const Job& j) {
    if (j.done == 0) return 0;
    double m = j.lat_sum / double(j.done);
    return std::sqrt(std::max(0.0, j.lat_sq / double(j.done) - m * m));
}

}   // namespace bfqtest
