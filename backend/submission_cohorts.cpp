#include "backend/submission_cohorts.hpp"

#include <algorithm>

namespace nbdsched::backend {

std::size_t SubmissionCohorts::cap(std::size_t held) const {
    return std::max(k_min_in_kernel, (std::max(peak_, held) + 1) / 2);
}

std::size_t SubmissionCohorts::admit(std::size_t in_kernel, std::size_t waiting) const {
    if (!on_) return waiting;
    const std::size_t most = cap(in_kernel + waiting);
    return in_kernel >= most ? 0 : std::min(waiting, most - in_kernel);
}

std::size_t SubmissionCohorts::at_completions(std::size_t in_kernel, std::size_t done, std::size_t waiting) {
    peak_ = std::max(peak_ - (peak_ + 63) / 64, in_kernel + waiting);   // at least 1 a reap
    if (!on_) return waiting;
    const std::size_t left = in_kernel - std::min(in_kernel, done);
    const std::size_t most = cap(0);
    if (left >= most) return waiting;   // a disk that completes one by one: keep it deep
    return std::min(waiting, most - left);
}

void SubmissionCohorts::completed(std::uint64_t in_kernel_ns) {
    latency_ns_ = latency_ns_ - latency_ns_ / 32 + in_kernel_ns / 32;
    if (latency_ns_ >= k_slow_ns) on_ = true;
    if (latency_ns_ < k_fast_ns) on_ = false;
}

}   // namespace nbdsched::backend
