// What the simulator runs: a device (timing profile), a scheduler policy with
// tunables, and fio-like jobs, each its own scheduler queue inside a group.
// Plain data, no YAML: tests build it in C++, the CLI reads it from a file.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/units.hpp"
#include "sched/pool_share.hpp"
#include "sched/qos/spec.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sim {

using namespace std::chrono_literals;

enum class Pattern { sequential,
                     random };

struct JobSpec {
    std::string name;
    std::string group = "default";
    sched::Op op = sched::Op::read;   // read or write
    Pattern pattern = Pattern::sequential;
    bool sync = true;   // reads are always sync; writes as set (O_DIRECT: sync)
    std::uint64_t block_size = 4096;
    unsigned iodepth = 1;                  // requests the job keeps outstanding
    Nanos think_time{0};                   // between a completion and the next issue
    std::optional<std::uint64_t> offset;   // region start; default: job index * size
    std::uint64_t size = 1ull << 30;       // region length the job reads/writes in
    Nanos start_delay{0};
};

struct GroupSpec {
    GroupSpec() = default;
    GroupSpec(std::string name_, unsigned weight_ = 0, sched::qos::GroupQos qos_ = {})
        : name(std::move(name_)), weight(weight_), qos(qos_) {}

    std::string name;
    unsigned weight = 0;        // 0: the policy's default weight
    sched::qos::GroupQos qos;   // any set: the scheduler runs behind the QoS layer
};

// The request pool between the jobs and the scheduler (see request_pool.hpp).
struct PoolSpec {
    enum class Mode { unlimited,
                      line,
                      batching };
    Mode mode = Mode::unlimited;
    unsigned nr_requests = 128;     // the kernel's default nr_requests
    unsigned batch_requests = 32;   // BLK_BATCH_REQ
    Nanos batch_time = 20ms;        // BLK_BATCH_TIME (HZ / 50)
    // line: groups share the pool by weight, as limits.inflight_fair_share
    // (on by default) does in the daemon; a group counts as using the pool
    // for share_idle after its last request came back.
    bool fair_share = true;
    Nanos share_idle = sched::default_share_idle;
};

// A run-time tunable change, as the daemon's control socket would make it.
struct TunableChange {
    Nanos at{0};
    std::string name;
    std::string value;
};

struct Workload {
    std::string profile = "ssd";   // hdd | ssd | nvme
    std::map<std::string, std::string> profile_params;
    std::string policy = "none";   // none | cfq | bfq
    sched::Tunables tunables;
    Nanos runtime = 10s;
    Nanos ramp_time{0};   // completions before this are not counted
    std::uint64_t seed = 1;
    std::vector<GroupSpec> groups;
    std::vector<JobSpec> jobs;
    std::vector<TunableChange> changes;
    PoolSpec pool;
    Nanos trace_window{0};   // record every depth change in [ramp_time, ramp_time + this)
    // A loaded host's timers: every wake-up and completion reaches the
    // scheduler late by a pseudo-random amount in [0, this] (0: exactly on
    // time), the same for a seed with any standard library (timer_slack.hpp).
    Nanos timer_slack{0};
};

}   // namespace nbdsched::sim
