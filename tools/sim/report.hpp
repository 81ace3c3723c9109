// Prints simulator results as a fixed-width table (for people) or JSON (for
// scripts and the bench reports).
#pragma once

#include <ostream>

#include "tools/sim/results.hpp"

namespace nbdsched::sim {

void print_table(std::ostream& out, const Results& results);
void print_json(std::ostream& out, const Results& results);
// The depth trace, one line per change: at_us,device,queued,pool,sleeping.
void print_trace_csv(std::ostream& out, const Results& results);

}   // namespace nbdsched::sim
