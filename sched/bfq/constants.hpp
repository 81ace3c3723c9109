// Internal constants of BFQ (block/bfq-iosched.c) that more than one file
// uses, with the kernel's names so the code can be compared line by line.
#pragma once

#include <chrono>
#include <cstdint>

#include "common/units.hpp"

namespace nbdsched::sched::bfq {

inline constexpr Nanos kMinTt = std::chrono::milliseconds(2);   // BFQ_MIN_TT
inline constexpr std::uint64_t kSectThrNonrot = 2 * 32;         // BFQQ_SECT_THR_NONROT, sectors

}   // namespace nbdsched::sched::bfq
