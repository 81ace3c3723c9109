// The `bfq` policy: Budget Fair Queueing after Linux block/bfq-iosched.c.
// See docs/schedulers-bfq.md for the user-facing description.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "sched/scheduler.hpp"

namespace nbdsched::sched {

// Returns nullptr and sets `error` on an unknown or malformed tunable.
std::unique_ptr<Scheduler> make_bfq(const DeviceTraits& device, const Tunables& tunables,
                                    std::string& error);
std::vector<std::string> bfq_tunable_names();

}   // namespace nbdsched::sched
