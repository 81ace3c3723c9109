#include "tools/sim/engine.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <queue>
#include <unordered_map>

#include "timing/profiles.hpp"
#include "sched/qos/qos_scheduler.hpp"
#include "tools/sim/depth_log.hpp"
#include "tools/sim/job.hpp"
#include "tools/sim/request_pool.hpp"
#include "tools/sim/timer_slack.hpp"

namespace nbdsched::sim {
namespace {

using sched::Request;
using sched::Time;

enum class Kind { issue,
                  wake,
                  complete,
                  wakeup,
                  change };

struct Event {
    Time at;
    std::uint64_t seq;   // ties break in insertion order: deterministic
    Kind kind;
    std::uint64_t arg;   // job index, request id or change index
    bool operator>(const Event& o) const { return at != o.at ? at > o.at : seq > o.seq; }
};

struct Pending {
    std::size_t job;
    Time wanted;      // when the job wanted to send it: latency counts from here, as fio's does
    Time submitted;   // when it reached the scheduler (after the request pool)
    std::uint64_t bytes;
    bool dispatched = false;
};

// A job's requests waiting in the scheduler, for the starvation metrics:
// `since` is when the current stretch without a dispatch began (the later of
// the job's last dispatch and the moment its backlog became non-empty).
struct Backlog {
    std::uint64_t queued = 0;
    Time since{};
};

class Runner {
public:
    Runner(const Workload& w, sched::Scheduler& s, timing::DeviceModel& m)
        : w_(w),
          s_(s),
          m_(m),
          end_(w.runtime),
          ramp_(std::min(w.ramp_time, w.runtime)),
          pool_(w.pool, w.jobs.size()),
          ready_(w.jobs.size()),
          asleep_(w.jobs.size()),
          depth_(ramp_, end_, w.trace_window),
          slack_(w.seed, w.timer_slack) {}

    Results run(std::string& error);

private:
    void push(Time at, Kind kind, std::uint64_t arg) { events_.push({at, seq_++, kind, arg}); }
    Time late(Time at);
    void issue(std::size_t job, Time wanted, Time now);
    void run_job(std::size_t job, Time now);
    void wake_pool_sleepers(Time now);
    void complete(std::uint64_t id, Time now);
    void pump(Time now);
    void device_busy_change(Time now, bool busy);
    void note_dispatch(std::uint64_t id, Time now);
    Results collect();

    const Workload& w_;
    sched::Scheduler& s_;
    timing::DeviceModel& m_;
    Time end_, ramp_;
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
    std::uint64_t seq_ = 0;
    std::uint64_t next_id_ = 1;
    std::vector<JobStream> streams_;
    std::vector<sched::GroupId> job_group_;
    std::map<std::string, sched::GroupId> group_ids_;
    std::unordered_map<std::uint64_t, Pending> pending_;
    std::vector<EntityResult> job_results_;
    std::vector<LatencyLog> job_logs_;
    std::vector<Backlog> backlog_;
    std::optional<Time> armed_;     // the wake-up the scheduler asked for
    std::uint64_t armed_seq_ = 0;   // which wakeup event delivers it (it may come late)
    unsigned device_in_flight_ = 0;
    Time busy_since_{};
    Nanos busy_{0};
    RequestPool pool_;
    std::vector<std::deque<Time>> ready_;   // when a job came to want the requests it has not sent
    std::vector<bool> asleep_;              // waiting for the pool to wake it
    DepthLog depth_;
    TimerSlack slack_;
    Results r_;
};

Time Runner::late(Time at) { return at + slack_.next(); }

void Runner::issue(std::size_t job, Time wanted, Time now) {
    if (now >= end_) return;
    const JobSpec& spec = w_.jobs[job];
    Request req;
    req.id = next_id_++;
    req.queue = job + 1;
    req.group = job_group_[job];
    req.op = spec.op;
    req.offset = streams_[job].next_offset();
    req.length = spec.block_size;
    req.sync = spec.op == sched::Op::read || spec.sync;
    req.arrival = now;
    pending_.emplace(req.id, Pending{job, wanted, now, req.length, false});
    if (backlog_[job].queued++ == 0) backlog_[job].since = now;
    ++r_.submitted;
    s_.submit(req, now);
}

// The job sends what it has until the pool says no; then it sleeps, and
// what it wants meanwhile waits for the wake-up (a process blocked in
// io_submit reaps nothing).
void Runner::run_job(std::size_t job, Time now) {
    while (!ready_[job].empty() && !asleep_[job]) {
        if (!pool_.get(job, now)) {
            asleep_[job] = true;
            wake_pool_sleepers(now);   // joining the line may hand others a ticket
            return;
        }
        Time wanted = ready_[job].front();
        ready_[job].pop_front();
        issue(job, wanted, now);
    }
}

void Runner::wake_pool_sleepers(Time now) {
    for (std::size_t job : pool_.woken()) push(now, Kind::wake, job);
}

void Runner::complete(std::uint64_t id, Time now) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Pending p = it->second;
    pending_.erase(it);
    --device_in_flight_;
    if (device_in_flight_ == 0) device_busy_change(now, false);
    ++r_.completed;
    s_.complete(id, now);
    pool_.put(p.job, now);
    wake_pool_sleepers(now);
    if (now >= ramp_ && now <= end_) {
        ++job_results_[p.job].ios;
        job_results_[p.job].bytes += p.bytes;
        job_logs_[p.job].add(now - p.wanted);
    }
    push(now + w_.jobs[p.job].think_time, Kind::issue, p.job);
}

void Runner::device_busy_change(Time now, bool busy) {
    if (busy) {
        busy_since_ = now;
        return;
    }
    Time from = std::max(busy_since_, ramp_), to = std::min(now, end_);
    if (to > from) busy_ += to - from;
}

void Runner::note_dispatch(std::uint64_t id, Time now) {
    auto it = pending_.find(id);
    if (it == pending_.end()) return;
    Pending& p = it->second;
    p.dispatched = true;
    EntityResult& jr = job_results_[p.job];
    Backlog& b = backlog_[p.job];
    jr.wait_max = std::max(jr.wait_max, now - p.submitted);
    jr.starved_max = std::max(jr.starved_max, now - b.since);
    if (b.queued > 0) --b.queued;
    b.since = now;   // any requests still queued start waiting for the next one now
}

void Runner::pump(Time now) {
    while (auto req = s_.dispatch(now)) {
        ++r_.dispatched;
        note_dispatch(req->id, now);
        if (device_in_flight_ >= m_.queue_depth()) ++r_.depth_violations;
        if (device_in_flight_++ == 0) device_busy_change(now, true);
        Time done = m_.submit(timing::Io{req->op, req->offset, req->length}, now);
        push(late(done), Kind::complete, req->id);
    }
    auto wake = s_.next_wakeup();
    if (!wake || wake == armed_) return;
    if (*wake <= now) {
        // The scheduler asks to be called now although dispatch() just
        // returned nothing: count it and retry a microsecond later rather
        // than spinning at one instant.
        ++r_.late_wakeups;
        wake = now + Nanos(1000);
    }
    armed_ = wake;
    push(late(*wake), Kind::wakeup, ++armed_seq_);
}

Results Runner::run(std::string& error) {
    std::size_t n = w_.jobs.size();
    for (const auto& g : w_.groups) {
        sched::GroupId id = sched::GroupId(group_ids_.size() + 1);
        if (!group_ids_.emplace(g.name, id).second) {
            error = "group '" + g.name + "' defined twice";
            return {};
        }
        if (g.weight != 0) s_.set_group(id, g.weight);
        if (!g.qos.any()) continue;
        auto* layer = sched::qos::qos_layer(s_);
        std::string why = layer ? layer->set_qos(id, g.qos, Time{}) : "the scheduler has no QoS layer";
        if (!why.empty()) {
            error = "group '" + g.name + "': " + why;
            return {};
        }
    }
    for (std::size_t j = 0; j < n; ++j) {
        const JobSpec& spec = w_.jobs[j];
        if (spec.block_size == 0 || spec.iodepth == 0) {
            error = "job '" + spec.name + "': block size and iodepth must be > 0";
            return {};
        }
        auto [it, added] = group_ids_.emplace(spec.group, sched::GroupId(group_ids_.size() + 1));
        (void)added;
        job_group_.push_back(it->second);
        streams_.emplace_back(spec, j, w_.seed);
        s_.open_queue(j + 1, it->second, Time{});
        for (unsigned d = 0; d < spec.iodepth; ++d) push(spec.start_delay, Kind::issue, j);
    }
    for (std::size_t c = 0; c < w_.changes.size(); ++c) push(w_.changes[c].at, Kind::change, c);
    // The pool's weights are the scheduler's, as the daemon's device syncs its
    // in-flight budget from the scheduler's stats.
    auto stats = s_.stats(Time{});
    for (std::size_t j = 0; j < n; ++j) pool_.set_group(j, job_group_[j], stats.groups[job_group_[j]].weight);
    job_results_.resize(n);
    job_logs_.resize(n);
    backlog_.resize(n);

    while (!events_.empty() && events_.top().at <= end_) {
        Event e = events_.top();
        events_.pop();
        switch (e.kind) {
        case Kind::issue:
            ready_[e.arg].push_back(e.at);
            run_job(e.arg, e.at);
            break;
        case Kind::wake:
            asleep_[e.arg] = false;
            run_job(e.arg, e.at);
            break;
        case Kind::complete: complete(e.arg, e.at); break;
        case Kind::wakeup:
            if (e.arg != armed_seq_) continue;   // superseded by a later re-arm
            armed_.reset();
            break;
        case Kind::change: {
            const TunableChange& c = w_.changes[e.arg];
            std::string err = s_.set_tunable(c.name, c.value, e.at);
            if (!err.empty()) {
                error = "change at " + format_duration(c.at) + ": " + err;
                return {};
            }
            break;
        }
        }
        pump(e.at);
        depth_.record(e.at, {e.at, device_in_flight_, unsigned(s_.queued()), pool_.allocated(),
                             unsigned(pool_.sleeping())});
    }
    if (device_in_flight_ > 0) device_busy_change(end_, false);
    return collect();
}

Results Runner::collect() {
    Nanos measured = end_ - ramp_;
    r_.policy = w_.policy;
    r_.profile = w_.profile;
    r_.measured = measured;
    r_.utilisation = measured.count() > 0 ? double(busy_.count()) / double(measured.count()) : 0;
    std::map<sched::GroupId, std::pair<EntityResult, LatencyLog>> groups;
    LatencyLog all;
    for (const auto& [name, id] : group_ids_) {
        EntityResult& g = groups[id].first;
        g.name = g.group = name;
        for (const auto& spec : w_.groups)
            if (spec.name == name) g.weight = spec.weight;
    }
    // Requests still queued when the clock stops have waited (and their
    // jobs starved) until now.
    for (const auto& [id, p] : pending_) {
        if (p.dispatched) continue;
        Nanos& wait = job_results_[p.job].wait_max;
        wait = std::max(wait, end_ - p.submitted);
    }
    r_.scheduler = s_.stats(end_);
    for (std::size_t j = 0; j < w_.jobs.size(); ++j) {
        EntityResult& jr = job_results_[j];
        if (auto q = r_.scheduler.queues.find(j + 1); q != r_.scheduler.queues.end()) {
            jr.expired = q->second.expired;
            jr.io_bound = q->second.io_bound;
            jr.idle_window = q->second.idle_window;
        }
        if (backlog_[j].queued > 0) jr.starved_max = std::max(jr.starved_max, end_ - backlog_[j].since);
        jr.name = w_.jobs[j].name;
        jr.group = w_.jobs[j].group;
        auto& [g, glog] = groups[job_group_[j]];
        jr.weight = g.weight;
        finish_entity(jr, job_logs_[j], measured);
        g.ios += jr.ios;
        g.bytes += jr.bytes;
        glog.append(job_logs_[j]);
        for (EntityResult* e : {&g, &r_.total}) {
            e->wait_max = std::max(e->wait_max, jr.wait_max);
            e->starved_max = std::max(e->starved_max, jr.starved_max);
        }
        r_.total.ios += jr.ios;
        r_.total.bytes += jr.bytes;
        all.append(job_logs_[j]);
    }
    r_.jobs = std::move(job_results_);
    for (auto& [id, entry] : groups) {
        // A named copy: clang 14 cannot capture a structured binding.
        const std::string& name = entry.first.name;
        if (entry.second.count() == 0 && entry.first.ios == 0 &&
            std::none_of(w_.jobs.begin(), w_.jobs.end(),
                         [&](const JobSpec& j) { return j.group == name; }))
            continue;   // a defined group without jobs
        finish_entity(entry.first, entry.second, measured);
        entry.first.expired = r_.scheduler.groups[id].expired;
        r_.groups.push_back(std::move(entry.first));
    }
    r_.total.name = "total";
    finish_entity(r_.total, all, measured);
    r_.total.expired = r_.scheduler.device.expired;
    r_.queued_at_end = s_.queued();
    r_.in_flight_at_end = s_.in_flight();
    r_.depth = depth_.finish();
    r_.pool_sleeps = pool_.sleeps();
    return std::move(r_);
}

}   // namespace

Results simulate(const Workload& workload, sched::Scheduler& scheduler,
                 timing::DeviceModel& model, std::string& error) {
    error.clear();
    Runner runner(workload, scheduler, model);
    return runner.run(error);
}

Results simulate(const Workload& workload, std::string& error) {
    auto model = timing::make_model(workload.profile, workload.profile_params, error);
    if (!model) {
        if (error.empty()) error = "the simulator needs a timing profile (hdd, ssd, nvme), not none";
        return {};
    }
    sched::DeviceTraits traits{model->rotational(), model->queue_depth()};
    auto scheduler = sched::make_scheduler(workload.policy, traits, workload.tunables, error);
    if (!scheduler) return {};
    if (std::any_of(workload.groups.begin(), workload.groups.end(), [](const GroupSpec& g) { return g.qos.any(); }))
        scheduler = sched::qos::with_qos(std::move(scheduler), traits);
    return simulate(workload, *scheduler, *model, error);
}

}   // namespace nbdsched::sim
