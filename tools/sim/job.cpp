#include "tools/sim/job.hpp"

#include <algorithm>

namespace nbdsched::sim {

JobStream::JobStream(const JobSpec& spec, std::size_t index, std::uint64_t seed)
    : start_(spec.offset ? *spec.offset : std::uint64_t(index) * spec.size),
      blocks_(std::max<std::uint64_t>(1, spec.size / std::max<std::uint64_t>(1, spec.block_size))),
      block_size_(spec.block_size),
      random_(spec.pattern == Pattern::random),
      state_(seed * 0x9E3779B97F4A7C15ull + index + 1) {}

std::uint64_t JobStream::random() {
    // splitmix64: tiny, good enough for offsets, and fully specified (unlike
    // std::uniform_int_distribution, whose output differs between libraries).
    std::uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

std::uint64_t JobStream::next_offset() {
    std::uint64_t block;
    if (random_) {
        block = random() % blocks_;
    } else {
        block = next_block_;
        next_block_ = (next_block_ + 1) % blocks_;
    }
    return start_ + block * block_size_;
}

}   // namespace nbdsched::sim
