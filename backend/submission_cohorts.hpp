// When a loop-driven engine (file_uring.hpp) hands the requests it holds to
// the kernel. Why not at once: a disk that completes its queue in passes
// (Firecracker's virtio-blk: the device pops every request in its ring, runs
// them, then raises one interrupt for all) keeps every request of a pass
// together, so with one client the whole queue depth moves in lockstep and
// the disk stands idle while the daemon and the client turn the replies
// round. Requests that arrive while a pass runs would join it; held back
// until its completions, they form a second cohort that the disk runs while
// the first one travels (docs/file-backend-io.md, "Cohorts").
#pragma once

#include <algorithm>
#include <cstddef>

namespace nbdsched::backend::cohorts {

// Below this many requests in the kernel nothing waits: at a low queue depth
// the turnaround, not the disk, sets the pace, and holding a request behind
// one or two others would only serialise them.
inline constexpr std::size_t k_min_in_kernel = 8;

// A cohort goes into the kernel this many entries per io_uring_enter: the
// block layer plugs what one call submits and starts the disk at the end of
// the call (32 reads took 75 us on the test VM), so smaller calls let the
// disk begin on the first entries while the rest are being submitted.
inline constexpr std::size_t k_chunk = 8;

// How many of `waiting` requests go to the kernel at the end of a loop turn,
// beside the `in_kernel` ones whose completions are not reaped yet: up to
// half of all the engine holds (at least k_min_in_kernel), so that a burst
// arriving at an idle disk makes two cohorts. The rest go in when the next
// completions are reaped (all of them, before those completions are
// reported).
constexpr std::size_t admit(std::size_t in_kernel, std::size_t waiting) {
    const std::size_t cap = std::max(k_min_in_kernel, (in_kernel + waiting + 1) / 2);
    return in_kernel >= cap ? 0 : std::min(waiting, cap - in_kernel);
}

}   // namespace nbdsched::backend::cohorts
