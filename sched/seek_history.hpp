// A queue's last 32 requests, one bit each: did the request seek? CFQ and
// BFQ both classify a queue as seeky from it (CFQQ_SEEKY: more than 4 of
// 32; BFQQ_SEEKY: more than 19 of 32).
#pragma once

#include <cstdint>

namespace nbdsched::sched {

class SeekHistory {
public:
    void add(bool sought);
    // More than `threshold` of the last 32 requests sought (the kernel's test).
    bool seeky(unsigned threshold) const;
    // seeky(), or a queue with 2 to 31 requests whose every request after
    // its first (which has nothing to measure from) sought. For rules that must
    // hold from a queue's start: BFQ needs 20 requests to call a random
    // reader seeky, and a flooder held back by a request pool sends them
    // over seconds, during which it would be served as sequential.
    bool seeky_so_far(unsigned threshold) const;

private:
    std::uint32_t bits_ = 0;
    std::uint32_t set_ = 0;       // bits set in bits_ (no popcount instruction in a generic x86-64 build)
    std::uint32_t samples_ = 0;   // requests seen, up to 32
};

}   // namespace nbdsched::sched
