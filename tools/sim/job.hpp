// One simulated job's address stream: where its next request goes.
// Random offsets come from a per-job splitmix64 stream seeded from the
// workload seed and the job index, so runs are bit-for-bit repeatable.
#pragma once

#include <cstdint>

#include "tools/sim/workload.hpp"

namespace nbdsched::sim {

class JobStream {
public:
    JobStream(const JobSpec& spec, std::size_t index, std::uint64_t seed);

    // Offset and length of the next request (block_size, aligned, inside the
    // job's region; sequential jobs wrap around at the region's end).
    std::uint64_t next_offset();
    std::uint64_t region_start() const { return start_; }

private:
    std::uint64_t random();

    std::uint64_t start_;
    std::uint64_t blocks_;   // region size in blocks (>= 1)
    std::uint64_t block_size_;
    bool random_;
    std::uint64_t next_block_ = 0;
    std::uint64_t state_;
};

}   // namespace nbdsched::sim
