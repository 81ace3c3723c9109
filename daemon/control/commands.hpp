// The control protocol: one JSON object per line each way.
//
//   {"cmd":"list"}                                   -> {"ok":true, "groups":[..], "devices":[..]}
//   {"cmd":"stats"}                                  -> {"ok":true, "devices":[..]}
//   {"cmd":"get","device":D,"tunable":T}             -> {"ok":true, "value":"8ms"}
//   {"cmd":"set","device":D,"tunable":T,"value":V}   -> {"ok":true, "value":<as read back>}
//   {"cmd":"weight","group":G,"weight":N}            -> {"ok":true}
//   {"cmd":"faults","device":D[,"enabled":B]}        -> {"ok":true, "enabled":B, "rules":N, "faults":{..}}
//   anything wrong                                   -> {"ok":false, "error":"..."}
//
// Runs on loop 0's thread. What reads or changes devices runs inside
// state.exclusive(); `stats` pauses the loops only to copy the numbers
// (snapshot.hpp), and every reply is serialised after the loops resume.
#pragma once

#include <string>

#include "daemon/control/report.hpp"
#include "daemon/control/state.hpp"

namespace nbdsched::daemon::control {

Json handle_command(const Json& request, DaemonState& state);
// The line form: parses (a parse error is an {"ok":false} reply), handles, serialises.
std::string handle_line(const std::string& line, DaemonState& state);

// The weight of a group on every device's scheduler and in the table; an
// error message, empty on success. Shared by `ctl weight` and reload.
std::string apply_weight(DaemonState& state, const std::string& group, unsigned weight);

// Empty when ctl may change `group`, else why not: "no group 'x'", or, for a
// group a reload left out of the file (kept only for its open connections,
// never carried by a reload or restart), a message naming it.
std::string group_ctl_error(const DaemonState& state, const std::string& group);

}   // namespace nbdsched::daemon::control
