// What `nbdsched ctl` changed in a running daemon, each change beside the
// value the configuration file gave, as a planned restart hands it to the
// next process. That process keeps a change where its own file still gives
// the same value, and lets its file win where it does not: what a SIGHUP
// reload of that file would have done (docs/restart.md).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sched/qos/spec.hpp"

namespace nbdsched::daemon {

struct LiveChanges {
    struct Weight {
        std::string group;
        unsigned weight = 0;        // in force (set by `ctl weight`)
        unsigned file_weight = 0;   // the old process's file
    };
    struct Tunable {
        std::string device;
        std::string policy;   // the device's scheduler: a tunable does not carry to another policy
        std::string name;
        std::string value;                       // in force (set by `ctl set`)
        std::optional<std::string> file_value;   // the old process's file; nullopt: not written there
    };
    struct Faults {
        std::string device;
        bool enabled = true;   // `ctl faults DEVICE on|off`
    };
    // A group's reserve, limit and latency target, as one: the file's three
    // apply together where the file changes any (what a reload does).
    struct Qos {
        std::string group;
        sched::qos::GroupQos qos;        // in force (set by `ctl reserve|limit|latency-target`)
        sched::qos::GroupQos file_qos;   // the old process's file
    };
    std::vector<Weight> weights;
    std::vector<Tunable> tunables;
    std::vector<Faults> faults;
    std::vector<Qos> qos;

    bool empty() const { return weights.empty() && tunables.empty() && faults.empty() && qos.empty(); }
};

}   // namespace nbdsched::daemon
