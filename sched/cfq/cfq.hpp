// Public entry points of the `cfq` policy, called by sched/factory.cpp.
// The implementation lives in CfqScheduler (cfq_scheduler.hpp).
#pragma once

#include <memory>
#include <string>

#include "sched/scheduler.hpp"

namespace nbdsched::sched {

// Builds a CFQ scheduler with `tunables` applied over the defaults (seed 000:
// slice_idle auto = 8ms on rotational devices, 0 otherwise). nullptr + error on
// an unknown tunable or a bad value.
std::unique_ptr<Scheduler> make_cfq(const DeviceTraits& device, const Tunables& tunables,
                                    std::string& error);

}   // namespace nbdsched::sched
