// A tiny virtual-time loop for driving one Scheduler directly in unit tests:
// jobs (one queue each) keep `iodepth` requests outstanding, a fake device
// completes them, and every invariant of the seam is checked on the way.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <vector>

#include "sched/scheduler.hpp"
#include "test_event_queue.hpp"

namespace cfqtest {

using namespace nbdsched;
using namespace nbdsched::sched;
using namespace std::chrono_literals;

struct JobSpec {
    QueueId queue = 0;
    GroupId group = 0;
    Op op = Op::read;
    bool sync = true;
    bool sequential = true;
    std::uint64_t block = 4096;
    std::uint64_t region = 0;   // byte offset where the job's area starts
    std::uint64_t region_size = 1ull << 30;
    int iodepth = 1;
    Nanos think{};
};

struct JobResult {
    std::uint64_t completed = 0;
    std::uint64_t bytes = 0;
    Nanos max_wait{};   // submit -> dispatch, worst request
};

// Device service time of one request given where the head was.
using ServiceModel = std::function<Nanos(const Request&, std::uint64_t head)>;

// A device with `channels` requests in service at once (1 = a disk).
struct FakeDevice {
    unsigned channels = 1;
    ServiceModel service;
};

inline FakeDevice fixed_latency(Nanos latency, unsigned channels) {
    return FakeDevice{channels, [latency](const Request&, std::uint64_t) { return latency; }};
}

// A disk: transfer at 100 MB/s, plus a 6 ms seek when not contiguous.
inline FakeDevice simple_disk() {
    return FakeDevice{1, [](const Request& r, std::uint64_t head) {
                          Nanos t = Nanos(r.length * 10);   // 10 ns/byte
                          if (r.offset != head) t += 6ms;
                          return t;
                      }};
}

class Rig {
public:
    Rig(std::unique_ptr<Scheduler> s, FakeDevice device, unsigned max_depth)
        : s_(std::move(s)), dev_(std::move(device)), max_depth_(max_depth) {}

    Scheduler& sched() { return *s_; }

    std::size_t add_job(const JobSpec& spec) {
        jobs_.push_back(Job{spec, spec.region, {}, spec.queue * 7919 + 1});
        s_->open_queue(spec.queue, spec.group, now_);
        return jobs_.size() - 1;
    }

    // Runs until `until` (jobs keep issuing), checking invariants.
    void run_until(Time until) {
        if (!started_) {
            started_ = true;
            for (std::size_t j = 0; j < jobs_.size(); ++j)
                for (int k = 0; k < jobs_[j].spec.iodepth; ++k) issue(j);
        }
        drain();
        while (true) {
            std::optional<Time> next;
            if (!events_.empty()) next = events_.next_time();
            if (auto w = s_->next_wakeup()) {
                if (*w < now_) FAIL_CHECK("wakeup in the past");
                if (!next || *w < *next) next = *w;
            }
            if (!next || *next > until) break;
            now_ = std::max(now_, *next);
            step();
        }
        now_ = std::max(now_, until);
    }

    // Stops issuing and runs until everything submitted has completed.
    void finish() {
        stopping_ = true;
        run_until(now_ + 3600s);
        CHECK(s_->queued() == 0);
        CHECK(s_->in_flight() == 0);
        CHECK(dispatched_ == requests_.size());
        CHECK(completed_ == requests_.size());
    }

    const JobResult& result(std::size_t job) const { return jobs_[job].result; }
    Time now() const { return now_; }
    std::uint64_t submitted() const { return requests_.size(); }
    unsigned max_seen_depth() const { return max_seen_depth_; }
    void set_job_think(std::size_t job, Nanos think) { jobs_[job].spec.think = think; }

private:
    struct Job {
        JobSpec spec;
        std::uint64_t next_offset;
        JobResult result;
        std::uint64_t lcg;
    };
    enum class Kind { complete,
                      issue };
    struct Event {
        Kind kind;
        RequestId id;
        std::size_t job;
    };
    // One per request submitted, at index id - 1 (ids count from 1).
    struct Record {
        std::size_t job;
        Time submitted;
        std::uint64_t length = 0;   // as dispatched
        bool dispatched = false, completed = false;
    };
    Record* record(RequestId id) { return id >= 1 && id <= requests_.size() ? &requests_[id - 1] : nullptr; }

    void issue(std::size_t j) {
        if (stopping_) return;
        Job& job = jobs_[j];
        Request r;
        r.id = next_id_++;
        r.queue = job.spec.queue;
        r.group = job.spec.group;
        r.op = job.spec.op;
        r.sync = job.spec.sync;
        r.length = job.spec.block;
        r.arrival = now_;
        if (job.spec.sequential) {
            r.offset = job.next_offset;
            job.next_offset += job.spec.block;
            if (job.next_offset >= job.spec.region + job.spec.region_size) job.next_offset = job.spec.region;
        } else {
            job.lcg = job.lcg * 6364136223846793005ull + 1442695040888963407ull;   // deterministic
            std::uint64_t blocks = job.spec.region_size / job.spec.block;
            r.offset = job.spec.region + ((job.lcg >> 17) % blocks) * job.spec.block;
        }
        requests_.push_back(Record{j, now_});
        s_->submit(r, now_);
    }

    void drain() {
        while (auto r = s_->dispatch(now_)) {
            // Checked on every dispatch: plain ifs keep millions of them cheap.
            Record* rec = record(r->id);
            if (!rec) FAIL("dispatched a request never submitted: " << r->id);
            if (rec->dispatched) FAIL_CHECK("dispatched twice: " << r->id);
            rec->dispatched = true;
            rec->length = r->length;
            ++dispatched_;
            if (s_->in_flight() > max_depth_) FAIL_CHECK("depth " << s_->in_flight() << " > " << max_depth_);
            max_seen_depth_ = std::max<unsigned>(max_seen_depth_, unsigned(s_->in_flight()));
            JobResult& res = jobs_[rec->job].result;
            res.max_wait = std::max(res.max_wait, now_ - rec->submitted);
            // Device: earliest free channel.
            Time start = now_;
            while (!busy_until_.empty() && *busy_until_.begin() <= now_) busy_until_.erase(busy_until_.begin());
            if (busy_until_.size() >= dev_.channels) {
                start = std::max(start, *busy_until_.begin());
                busy_until_.erase(busy_until_.begin());
            }
            Time done = start + dev_.service(*r, head_);
            head_ = r->offset + r->length;
            busy_until_.insert(done);
            events_.push(done, Event{Kind::complete, r->id, rec->job});
        }
    }

    void step() {
        // All events due now, in order; a due idle timer is fired by the
        // scheduler itself on the next call.
        while (!events_.empty() && events_.next_time() <= now_) {
            const Event ev = events_.pop();
            if (ev.kind == Kind::complete) {
                Record* rec = record(ev.id);
                if (!rec || !rec->dispatched) FAIL("completed a request never dispatched");
                if (rec->completed) FAIL_CHECK("completed twice: " << ev.id);
                rec->completed = true;
                ++completed_;
                s_->complete(ev.id, now_);
                JobResult& res = jobs_[ev.job].result;
                ++res.completed;
                res.bytes += rec->length;
                if (jobs_[ev.job].spec.think == Nanos{}) issue(ev.job);
                else events_.push(now_ + jobs_[ev.job].spec.think, Event{Kind::issue, 0, ev.job});
            } else {
                issue(ev.job);
            }
        }
        drain();
    }

    std::unique_ptr<Scheduler> s_;
    FakeDevice dev_;
    unsigned max_depth_;
    std::vector<Job> jobs_;
    schedtest::EventQueue<Event> events_;
    std::multiset<Time> busy_until_;
    std::vector<Record> requests_;
    std::uint64_t dispatched_ = 0, completed_ = 0;
    Time now_{};
    RequestId next_id_ = 1;
    std::uint64_t head_ = 0;
    unsigned max_seen_depth_ = 0;
    bool started_ = false, stopping_ = false;
};

inline std::unique_ptr<Scheduler> make_cfq_sched(bool rotational, unsigned depth, const Tunables& t = {}) {
    std::string error;
    auto s = make_scheduler("cfq", DeviceTraits{rotational, depth}, t, error);
    REQUIRE_MESSAGE(s, error);
    return s;
}

}   // namespace cfqtest
