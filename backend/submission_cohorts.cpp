#include "backend/submission_cohorts.hpp"

#include <algorithm>

namespace nbdsched::backend {

std::size_t SubmissionCohorts::cap(std::size_t held) const {
    return std::max(k_min_in_kernel, (std::max(peak_, held) + 1) / 2);
}

std::size_t SubmissionCohorts::admit(std::size_t in_kernel, std::size_t waiting) const {
    if (!on()) return waiting;
    const std::size_t most = cap(in_kernel + waiting);
    return in_kernel >= most ? 0 : std::min(waiting, most - in_kernel);
}

std::size_t SubmissionCohorts::at_completions(std::size_t in_kernel, std::size_t done, std::size_t waiting) {
    peak_ = std::max(peak_ - (peak_ + 63) / 64, in_kernel + waiting);   // at least 1 a reap
    if (!on()) return waiting;
    const std::size_t left = in_kernel - std::min(in_kernel, done);
    const std::size_t most = cap(0);
    if (left >= most) return waiting;   // a disk that completes one by one: keep it deep
    return std::min(waiting, most - left);
}

void SubmissionCohorts::reaped(std::size_t in_kernel, std::size_t done, std::uint64_t signals) {
    if (signals == 0 || in_kernel < k_min_in_kernel) return;
    const std::uint64_t per_signal = std::min<std::uint64_t>(done, in_kernel) * k_share_one / signals;
    const auto sample = static_cast<std::uint32_t>(per_signal / in_kernel);
    share_ = share_ - share_ / 32 + sample / 32;
    if (share_ >= k_on_share) on_ = true;
    if (share_ < k_off_share) on_ = false;
}

}   // namespace nbdsched::backend
