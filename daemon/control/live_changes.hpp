// `nbdsched ctl` changes across a planned restart: the old process
// describes what ctl changed (with its file's value beside each), the new
// one applies each change its own file leaves alone (docs/restart.md).
#pragma once

#include "daemon/control/state.hpp"
#include "daemon/tenancy/live_changes.hpp"

namespace nbdsched::daemon::control {

LiveChanges live_changes(const DaemonState& state);
// Logs each change kept and each one the file overrides; the kept ones are
// recorded as ctl's again, so the next restart carries them on too.
void apply_live_changes(DaemonState& state, const LiveChanges& changes);

}   // namespace nbdsched::daemon::control
