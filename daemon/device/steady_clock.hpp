// The daemon's one reading of steady_clock as scheduler time, for the device
// and its in-flight budget alike.
#pragma once

#include "sched/request.hpp"

namespace nbdsched::daemon {

// steady_clock as scheduler time.
sched::Time steady_now();

}   // namespace nbdsched::daemon
