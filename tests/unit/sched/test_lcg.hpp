// Deterministic pseudo-random numbers for the scheduler tests' event storms
// (Knuth's MMIX LCG, high bits): a seed gives the same trace everywhere.
#pragma once

#include <cstdint>

namespace nbdsched::sched::test {

struct Lcg {
    std::uint64_t x;
    // A number in [0, n).
    unsigned next(unsigned n) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return unsigned((x >> 33) % n);
    }
};

}   // namespace nbdsched::sched::test
