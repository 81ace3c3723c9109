// Records the simulation's depths as they change: a time-weighted histogram
// of the device's queue depth over the measured time, and a trace of every
// change inside a window.
#pragma once

#include "common/units.hpp"
#include "tools/sim/results.hpp"

namespace nbdsched::sim {

class DepthLog {
public:
    // Measured from `from` to `to`; the trace covers [from, from + window).
    DepthLog(Nanos from, Nanos to, Nanos window) : from_(from), to_(to), trace_end_(from + window) {}

    // The state from `now` on (call after every event).
    void record(Nanos now, const DepthSample& s);
    DepthProfile finish();

private:
    void account(Nanos until);

    Nanos from_, to_, trace_end_;
    Nanos last_at_{0};
    DepthSample last_;
    DepthProfile p_;
};

}   // namespace nbdsched::sim
