// SIGHUP reload, the acting half: re-read the config file the daemon was
// started with, plan (reload_plan.hpp) and apply what can change live, with
// sd_notify RELOADING=1 ... READY=1 around it. A file that does not load, or
// a change that cannot apply live, leaves everything as it was and says why
// in the log.
#pragma once

#include <functional>
#include <string>

#include "config/config.hpp"
#include "daemon/control/state.hpp"
#include "daemon/process/reload_plan.hpp"

namespace nbdsched::daemon {

// Adjusts a freshly loaded config the way main adjusted the first one
// (command line listen overrides); false and `error` to refuse it.
using ConfigAdjust = std::function<bool(config::Config&, std::string&)>;

// True when the new config is in force.
bool reload_config(control::DaemonState& state, const ConfigAdjust& adjust);

// Applies a plan whose ok() is true and makes `next` the config in force.
void apply_plan(control::DaemonState& state, const ReloadPlan& plan, config::Config next);

}   // namespace nbdsched::daemon
