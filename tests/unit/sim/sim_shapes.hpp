// Workloads of the seed shapes, built in C++ so tests do not read files, and
// a helper that runs one and fails the test on a simulator error.
#pragma once

#include <doctest/doctest.h>

#include "tools/sim/engine.hpp"
#include "tools/sim/workload.hpp"

namespace nbdsched::sim::shapes {

inline Results run(const Workload& w) {
    std::string error;
    Results r = simulate(w, error);
    REQUIRE_MESSAGE(error.empty(), error);
    CHECK(r.depth_violations == 0);
    return r;
}

// Bytes of the first group over the second's (two groups, the second served).
inline double group_ratio(const Results& r) {
    REQUIRE(r.groups.size() == 2);
    REQUIRE(r.groups[1].bytes > 0);
    return double(r.groups[0].bytes) / double(r.groups[1].bytes);
}

inline JobSpec job(std::string name, std::string group, sched::Op op, Pattern pattern,
                   std::uint64_t bs, unsigned iodepth, std::uint64_t size = 1ull << 30) {
    JobSpec j;
    j.name = std::move(name);
    j.group = std::move(group);
    j.op = op;
    j.pattern = pattern;
    j.block_size = bs;
    j.iodepth = iodepth;
    j.size = size;
    return j;
}

// A device, a policy with at most one tunable set ("" = default), a runtime.
inline Workload base(std::string profile, std::string policy, const std::string& tunable,
                     const std::string& value, Nanos runtime, Nanos ramp) {
    Workload w;
    w.profile = std::move(profile);
    w.policy = std::move(policy);
    if (!value.empty()) w.tunables[tunable] = value;
    w.runtime = runtime;
    w.ramp_time = ramp;
    return w;
}

// Seed 000: ssd, 10 jobs of 4k random reads at iodepth 64.
inline Workload seed000(std::string policy, std::string slice_idle) {
    Workload w = base("ssd", std::move(policy), "slice_idle", slice_idle, 2s, 200ms);
    for (int i = 0; i < 10; ++i)
        w.jobs.push_back(job("r" + std::to_string(i), "default", sched::Op::read, Pattern::random, 4096, 64));
    return w;
}

// Seed 000's cloud variant (exp1): 550 us per read, 16 channels, with the
// request pool in front of the scheduler in the given mode (nr_requests 128).
inline Workload seed000_cloud(std::string slice_idle, PoolSpec::Mode pool) {
    Workload w = seed000("cfq", std::move(slice_idle));
    w.profile_params = {{"read_latency", "550us"}, {"channels", "16"}};
    w.pool.mode = pool;
    return w;
}

// Seed 002: ssd, 5 jobs of 4k random reads, sync engine (one request each).
inline Workload seed002(std::string policy, std::string slice_idle) {
    Workload w = seed000(std::move(policy), std::move(slice_idle));
    w.jobs.resize(5);
    for (auto& j : w.jobs) j.iodepth = 1;
    return w;
}

// Seed 003: groups weighted 1000 and 100, one sync sequential writer each,
// on a queueing ssd (depth 32 >= 5).
inline Workload seed003(std::string policy, std::string group_idle) {
    Workload w = base("ssd", std::move(policy), "group_idle", group_idle, 4s, 500ms);
    w.groups = {{"heavy", 1000}, {"light", 100}};
    for (const char* g : {"heavy", "light"}) {
        w.jobs.push_back(job(g, g, sched::Op::write, Pattern::sequential, 4096, 1, 4ull << 30));
        w.jobs.back().sync = true;
    }
    return w;
}

// Sequential 64k sync readers at iodepth 1 on an hdd, far apart, in one group
// (experiment 5's shape).
inline Workload hdd_sequential_readers(std::string policy, std::string slice_idle, int readers) {
    Workload w = base("hdd", std::move(policy), "slice_idle", slice_idle, 4s, 500ms);
    for (int i = 0; i < readers; ++i)
        w.jobs.push_back(job("r" + std::to_string(i), "default", sched::Op::read, Pattern::sequential,
                             64 * 1024, 1, 100ull << 30));
    return w;
}

inline Workload hdd_two_readers(std::string policy, std::string slice_idle) {
    return hdd_sequential_readers(std::move(policy), std::move(slice_idle), 2);
}

// Two groups weighted 300 and 100, one random reader each at iodepth 4.
inline Workload weights_3to1(std::string policy, std::string profile) {
    Nanos runtime = profile == "hdd" ? Nanos(30s) : Nanos(4s);
    Workload w = base(std::move(profile), std::move(policy), "", "", runtime, 500ms);
    w.groups = {{"three", 300}, {"one", 100}};
    for (const char* g : {"three", "one"})
        w.jobs.push_back(job(g, g, sched::Op::read, Pattern::random, 4096, 4, 4ull << 30));
    return w;
}

}   // namespace nbdsched::sim::shapes
