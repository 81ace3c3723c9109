// The request pool's `line` mode: nbdsched's in-flight admission
// (limits.max_inflight_per_device with limits.inflight_fair_share, see
// daemon/device/inflight_budget.hpp), in request slots.
//
// Within a group, first come first served: a job that finds no room waits in
// its group's line with one request, and room that appears goes to a line's
// head as a ticket (a slot held for it); the job then queues again for its
// next one. With fair_share, groups share the pool by weight through the
// daemon's own rule (sched/pool_share.hpp): a group over its share waits even
// when the pool has room, a group under it is admitted even when the pool is
// full, freed room goes to the longest waiter among the groups under their
// share, and a group counts as using the pool for share_idle after its last
// slot came back. Without fair_share: one line for all groups.
//
// Two differences from the daemon: no byte budget (the simulator has no
// max_inflight_bytes_per_device), and so no "one ticket at a time" (the daemon
// waits for a ticket's request to learn its bytes; slots alone cannot overrun).
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <vector>

#include "common/units.hpp"
#include "sched/request.hpp"

namespace nbdsched::sim {

class AdmissionLine {
public:
    AdmissionLine(unsigned nr_requests, bool fair_share, Nanos share_idle, std::size_t jobs);

    // The job's group and that group's weight (all jobs start in group 0, weight 100).
    void set_group(std::size_t job, sched::GroupId group, unsigned weight);

    // May `job` take a request now? On false it waits in line until a ticket
    // wakes it (woken()); it must not ask again before.
    bool get(std::size_t job, Nanos now);
    // The job's request completed: its slot goes back, and on to the line.
    void put(std::size_t job, Nanos now);
    // Jobs handed a ticket since the last call: each should ask get() again.
    std::vector<std::size_t> woken();

    unsigned allocated() const { return count_; }
    std::size_t sleeping() const;
    std::uint64_t sleeps() const { return sleeps_; }
    // Slots the job's group holds (its requests and its unused tickets), and its share now.
    unsigned held(sched::GroupId group) const;
    std::uint64_t share(sched::GroupId group, Nanos now) const;

private:
    struct Waiting {
        std::uint64_t seq;   // arrival order across all groups
        std::size_t job;
    };
    struct Group {
        unsigned weight = 100;
        unsigned held = 0;
        std::deque<Waiting> line;
        Nanos idle_since{};
        bool ever_used = false;
    };

    Group& group_of(std::size_t job) { return groups_[job_group_[job]]; }
    bool eligible(sched::GroupId id, const Group& g, Nanos now) const;
    bool someone_eligible_waits(Nanos now) const;
    // Hands tickets to the longest waiters among the groups under their share.
    void serve(Nanos now);

    unsigned nr_requests_;
    bool fair_share_;
    Nanos share_idle_;
    std::vector<sched::GroupId> job_group_;
    std::vector<bool> ticket_;
    std::map<sched::GroupId, Group> groups_;
    std::vector<std::size_t> woken_;
    unsigned count_ = 0;
    std::uint64_t next_seq_ = 0;
    std::uint64_t sleeps_ = 0;
};

}   // namespace nbdsched::sim
