// What a simulation measured: per job, per group and in total, fio-style.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/units.hpp"
#include "sched/stats.hpp"

namespace nbdsched::sim {

struct LatencySummary {
    double mean_us = 0;
    double stddev_us = 0;
    double p99_us = 0;
    double max_us = 0;
};

// Collects latencies; summarise() sorts a copy, so it is cheap to keep adding.
class LatencyLog {
public:
    void add(Nanos latency) { ns_.push_back(latency.count()); }
    void append(const LatencyLog& other);
    std::size_t count() const { return ns_.size(); }
    LatencySummary summarise() const;

private:
    std::vector<std::int64_t> ns_;
};

struct EntityResult {
    std::string name;
    std::string group;     // jobs: their group; groups: themselves
    unsigned weight = 0;   // 0: policy default
    std::uint64_t ios = 0;
    std::uint64_t bytes = 0;
    double iops = 0;
    double mib_s = 0;
    LatencySummary latency;
    // Starvation, over the whole run (ramp included), jobs only; a group and
    // the total show the worst of their jobs. wait_max: the longest a request
    // waited in the scheduler (submission to dispatch). starved_max: the
    // longest stretch in which the job had requests queued in the scheduler
    // but got none dispatched (still running when the clock stops counts).
    // A deep job's own backlog raises wait_max, not starved_max: its queue
    // keeps getting dispatches.
    Nanos wait_max{0};
    Nanos starved_max{0};
    // Why the scheduler ended turns, over the whole run (ramp included): a
    // job's queue, a group, or the device (the total); and a job's queue
    // flags at the end (bfq io_bound, cfq idle_window), where set.
    std::array<std::uint64_t, sched::expiry_reasons> expired{};
    std::optional<bool> io_bound;
    std::optional<bool> idle_window;
};

// The device's queue depth over time, and a trace of every change (what the
// device, the scheduler and the request pool held) inside the trace window.
struct DepthSample {
    Nanos at{0};
    unsigned device = 0;     // requests at the device
    unsigned queued = 0;     // requests in the scheduler, not yet dispatched
    unsigned pool = 0;       // requests allocated from the pool (queued + device)
    unsigned sleeping = 0;   // jobs waiting for the pool
    bool operator==(const DepthSample& o) const {
        return device == o.device && queued == o.queued && pool == o.pool && sleeping == o.sleeping;
    }
};

struct DepthProfile {
    std::vector<Nanos> time_at;   // [d]: measured time with exactly d requests at the device
    double mean = 0;              // time-weighted mean depth over the measured time
    unsigned max = 0;
    std::vector<DepthSample> trace;
};

struct Results {
    std::string policy;
    std::string profile;
    Nanos measured{0};   // runtime - ramp_time
    std::vector<EntityResult> jobs;
    std::vector<EntityResult> groups;
    EntityResult total;
    double utilisation = 0;               // fraction of measured time with >= 1 request at the device
    std::uint64_t depth_violations = 0;   // dispatches beyond the device queue depth
    std::uint64_t late_wakeups = 0;       // next_wakeup() at or before now after a full drain
    std::uint64_t submitted = 0;          // totals over the whole run, ramp included
    std::uint64_t dispatched = 0;
    std::uint64_t completed = 0;
    std::uint64_t queued_at_end = 0;   // the scheduler's queued() / in_flight() when the clock stops
    std::uint64_t in_flight_at_end = 0;
    sched::SchedulerStats scheduler;
    DepthProfile depth;
    std::uint64_t pool_sleeps = 0;   // times a job found the request pool closed
};

// Fills iops, mib_s and latency of `r` from its ios/bytes and `log`.
void finish_entity(EntityResult& r, const LatencyLog& log, Nanos measured);

}   // namespace nbdsched::sim
