// One fault-injection rule (config key `faults:` of a device): which
// requests it matches and what it does to them. Shared by config/ (which
// parses and validates it) and backend/faulty (which applies it), so the two
// cannot disagree about what a rule means.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "common/units.hpp"

namespace nbdsched {

// Bits of FaultRule::ops.
enum FaultOp : unsigned {
    fault_read = 1u << 0,
    fault_write = 1u << 1,
    fault_flush = 1u << 2,
    fault_trim = 1u << 3,
    fault_zeroes = 1u << 4,
    fault_any = (1u << 5) - 1,
};
constexpr unsigned fault_op_count = 5;

struct FaultRule {
    unsigned ops = fault_any;
    // Only requests touching [offset, offset + length) match; a flush touches
    // no range, so a rule with a range never matches one.
    std::uint64_t offset = 0;
    std::uint64_t length = std::numeric_limits<std::uint64_t>::max();
    // Added before the request runs (whether or not it then fails).
    Nanos delay{0};
    // errno a matching request fails with; 0: the rule only delays.
    int error = 0;
    // Probability (0..1) that a matching request fails. The draw is the n-th
    // value of a splitmix64 sequence seeded with `seed`, n counting the
    // requests this rule matched: the same request sequence fails the same way.
    double rate = 1.0;
    std::uint64_t seed = 1;

    bool operator==(const FaultRule&) const = default;
    bool has_range() const { return offset != 0 || length != std::numeric_limits<std::uint64_t>::max(); }
};

// "read", "write", ... for a single bit; "" otherwise.
std::string_view fault_op_name(unsigned op);

}   // namespace nbdsched
