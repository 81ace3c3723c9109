// The discrete-event loop: a virtual clock, the jobs, one scheduler and one
// device timing model. After every event it drains the scheduler's dispatch(),
// hands each request to the model (which says when it completes) and re-arms
// the scheduler's wakeup, exactly as the daemon's device loop does in real time.
#pragma once

#include <string>

#include "timing/device_model.hpp"
#include "sched/scheduler.hpp"
#include "tools/sim/results.hpp"
#include "tools/sim/workload.hpp"

namespace nbdsched::sim {

// Builds the model and the scheduler from the workload and runs it. On a bad
// profile, policy or tunable, returns empty results and sets `error`.
Results simulate(const Workload& workload, std::string& error);

// Runs against a scheduler and model the caller built (tests, benchmarks).
// workload.profile/policy/tunables are only used as labels here.
Results simulate(const Workload& workload, sched::Scheduler& scheduler,
                 timing::DeviceModel& model, std::string& error);

}   // namespace nbdsched::sim
