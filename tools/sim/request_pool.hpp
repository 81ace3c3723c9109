// The request pool in front of the scheduler: how many requests may exist
// (allocated, not yet completed) and whose turn it is when the pool is full.
//
//   unlimited  every request goes straight to the scheduler (the default).
//   line       nbdsched's admission (limits.max_inflight_per_device): a job
//              that finds the pool full waits in line with one request, and
//              a freed slot goes to the head of the line as a ticket; the job
//              then queues again for its next one. One request per job in turn,
//              and across groups the daemon's inflight_fair_share (see
//              admission_line.hpp).
//   batching   the legacy Linux allocator (block/blk-core.c, __get_request,
//              get_request, __freed_request, 4.x): a process that had to
//              sleep becomes a "batcher" that may allocate up to
//              batch_requests (BLK_BATCH_REQ 32) within batch_time
//              (BLK_BATCH_TIME 20 ms) even while the pool is full, up to 3/2 x
//              nr_requests in all; a sleeper is woken (one, exclusive, FIFO)
//              only when a free leaves at most nr_requests - 1 allocated.
//
// Pure bookkeeping: the engine asks get() for each request a job wants to
// send, tells put() of each completion, and wakes the jobs woken() returns.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "common/units.hpp"
#include "tools/sim/admission_line.hpp"
#include "tools/sim/workload.hpp"

namespace nbdsched::sim {

class RequestPool {
public:
    RequestPool(const PoolSpec& spec, std::size_t jobs);

    // The job's group and its weight, for the line's fair share.
    void set_group(std::size_t job, sched::GroupId group, unsigned weight);

    // May `job` allocate a request now? On false the job sleeps in line
    // until woken(); it must not ask again before.
    bool get(std::size_t job, Nanos now);
    // A request of `job` was freed (completed).
    void put(std::size_t job, Nanos now);
    // The jobs woken since the last call, oldest first: each should ask
    // get() again at once (in line mode it holds a slot).
    std::vector<std::size_t> woken();

    unsigned allocated() const;
    std::size_t sleeping() const;
    std::uint64_t sleeps() const;

private:
    struct Proc {
        unsigned batch_left = 0;   // ioc->nr_batch_requests
        Nanos last_waited{};       // ioc->last_waited
    };

    bool line_mode() const;
    bool batching(const Proc& p, Nanos now) const;   // ioc_batching
    void set_batching(Proc& p, Nanos now);           // ioc_set_batching
    bool get_batching(std::size_t job, Nanos now);
    void sleep(std::size_t job);

    PoolSpec spec_;
    AdmissionLine admission_;
    std::vector<Proc> procs_;
    std::deque<std::size_t> line_;   // batching: sleeping jobs, oldest first
    std::vector<std::size_t> woken_;
    unsigned count_ = 0;   // rl->count[sync]
    bool full_ = false;    // blk_rl_full
    std::uint64_t sleeps_ = 0;
};

}   // namespace nbdsched::sim
