// The scheduler seam. Every request of a device passes through one Scheduler
// before it reaches the backend. Implementations are pure and deterministic:
// no I/O, no threads, no clock of their own. The driver (the daemon's device
// loop or the simulator) feeds events and asks what to dispatch:
//
//   submit(req, now)            a request arrived
//   dispatch(now) -> request?   call repeatedly until it returns nullopt
//   complete(id, now)           the device finished a dispatched request
//   next_wakeup() -> time?      if set, call dispatch(t) again at time t even
//                               when nothing else happens (idle timers, slices)
//
// After every event the driver drains dispatch() and re-arms its timer from
// next_wakeup(). The scheduler counts requests in flight at the device itself
// (dispatched but not completed) and never exceeds DeviceTraits::max_depth.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sched/request.hpp"
#include "sched/stats.hpp"

namespace nbdsched::sched {

struct DeviceTraits {
    bool rotational = false;
    unsigned max_depth = 32;   // requests the device accepts at once (NCQ depth)
};

// Tunables by their kernel sysfs names ("slice_idle" -> "8ms"). Values use
// units (parse_duration/parse_size); "auto" where a tunable allows it.
using Tunables = std::map<std::string, std::string, std::less<>>;

class Scheduler {
public:
    virtual ~Scheduler() = default;

    virtual std::string_view policy() const = 0;   // "none", "cfq", "bfq"

    // Groups: created on first call, re-weighted on later calls. Weight 1..1000.
    virtual void set_group(GroupId group, unsigned weight) = 0;
    // Queues: open before the first submit; close when the client goes away.
    // A closed queue's queued and in-flight requests still dispatch/complete.
    virtual void open_queue(QueueId queue, GroupId group, Time now) = 0;
    virtual void close_queue(QueueId queue, Time now) = 0;

    virtual void submit(const Request& request, Time now) = 0;
    virtual std::optional<Request> dispatch(Time now) = 0;
    virtual void complete(RequestId id, Time now) = 0;
    virtual std::optional<Time> next_wakeup() const = 0;

    // Run-time tunables. set_tunable returns an error message, empty on success;
    // the change applies from the next event without losing queued requests.
    virtual std::vector<std::string> tunable_names() const = 0;
    virtual std::optional<std::string> get_tunable(std::string_view name) const = 0;
    virtual std::string set_tunable(std::string_view name, std::string_view value, Time now) = 0;

    virtual std::size_t queued() const = 0;      // submitted, not yet dispatched
    virtual std::size_t in_flight() const = 0;   // dispatched, not yet completed
    virtual SchedulerStats stats(Time now) const = 0;
};

// Builds "none", "cfq" or "bfq" with the given tunables applied over the
// defaults (seed defaults: slice_idle auto = 8ms rotational / 0 otherwise).
// Returns nullptr and sets `error` on an unknown policy or a bad tunable.
std::unique_ptr<Scheduler> make_scheduler(std::string_view policy, const DeviceTraits& device,
                                          const Tunables& tunables, std::string& error);

// Tunable names a policy accepts, for config validation without a device.
std::vector<std::string> tunable_names(std::string_view policy);

}   // namespace nbdsched::sched
