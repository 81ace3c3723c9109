// A group's weight: what may be asked, the same through the configuration
// (groups[].weight), the control protocol and `nbdsched ctl weight`.
#pragma once

#include <cstdint>
#include <string>

namespace nbdsched::sched {

inline constexpr unsigned min_weight = 1, max_weight = 1000;

// Empty, or "out of range: 0 (allowed 1..1000)": the configuration's words.
std::string check_weight(std::uint64_t weight);
// The same for a weight given as text ("abc": "expected a whole number
// 1..1000, got 'abc'"); `weight` is set when it is empty.
std::string parse_weight(const std::string& text, unsigned& weight);

}   // namespace nbdsched::sched
