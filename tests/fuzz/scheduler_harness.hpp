// The device loop's side of the scheduler seam (sched/scheduler.hpp), shared
// by the fuzz targets that drive a scheduler: after every event, drain
// dispatch() and honour next_wakeup(), with the checks every such target
// makes (each request dispatched once, within the device's depth, no wakeup
// in the past, no spinning at one instant, no stuck request). A target adds
// its events and its own check of each dispatched request.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <set>
#include <vector>

#include "sched/scheduler.hpp"

namespace nbdsched::fuzz {

class SchedulerHarness {
public:
    virtual ~SchedulerHarness() = default;

    // The device finishes one of the requests it holds (pick modulo their count).
    void complete(std::size_t pick);
    // Time passes; wakeups that come due on the way are honoured.
    void advance(Nanos by);
    // No new work: the device completes everything and wakeups are followed;
    // every request must reach the device within `limit` of virtual time.
    void finish(Nanos limit);

protected:
    SchedulerHarness(std::unique_ptr<sched::Scheduler> s, unsigned depth) : s_(std::move(s)), depth_(depth) {}

    // The driver's part after every event: drain, then check the seam.
    void after_event();

    // The target's check of a request dispatch() gave: it must be one the
    // target submitted and still counts as waiting, which it stops doing.
    virtual void dispatched(const sched::Request& r) = 0;
    // Requests submitted and not yet dispatched, as the target counts them.
    virtual std::size_t waiting() const = 0;

    std::unique_ptr<sched::Scheduler> s_;
    unsigned depth_;
    sched::Time now_{};
    sched::RequestId next_id_ = 1;
    std::uint64_t completed_ = 0;

private:
    bool drain();

    std::set<sched::RequestId> dispatched_;
    std::vector<sched::RequestId> at_device_;
};

}   // namespace nbdsched::fuzz
