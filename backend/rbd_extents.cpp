// Block status of an RBD image: which byte ranges hold data and which are
// holes (never written, discarded: they read as zeros). librbd's
// rbd_diff_iterate2 from the image's creation (no start snapshot), with the
// parent's data counted (a clone reads its parent where it has nothing of
// its own) and exact extents within objects (whole_object = 0), as qemu's
// rbd driver asks for base:allocation.
//
// The call is synchronous: it runs on the device's I/O pool (the backend is
// blocking()), never on the event loop. Its cost is one request to the OSDs
// per object in the range (librbd sends up to rbd_concurrent_management_ops
// at once), so one call covers at most k_max_scan_objects objects: a client
// asking about a whole large image gets the first part and asks again, as
// NBD allows, and no pool thread waits on thousands of objects. A cluster
// that does not answer fails it after osd_op_timeout, as for data.
#include <algorithm>
#include <mutex>
#include <vector>

#include "backend/rbd_backend.hpp"
#include "backend/rbd_handles.hpp"

namespace nbdsched::backend {

namespace {

constexpr std::uint64_t k_max_scan_objects = 64;   // 256 MiB of 4 MiB objects

struct Allocated {
    // librbd may call back from its own threads.
    std::mutex lock;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> runs;   // offset, length
};

int on_extent(std::uint64_t offset, std::size_t length, int exists, void* arg) {
    auto* a = static_cast<Allocated*>(arg);
    if (!exists || length == 0) return 0;
    std::lock_guard guard(a->lock);
    a->runs.emplace_back(offset, length);
    return 0;
}

}   // namespace

int RbdBackend::extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) {
    if (!check(offset, length, nullptr)) return EINVAL;
    const std::uint64_t scan = std::max<std::uint64_t>(h_->object_size, 4096) * k_max_scan_objects;
    const std::uint64_t end = offset + std::min(length, scan);
    Allocated a;
    int r = librbd().rbd_diff_iterate2(h_->image, nullptr, offset, end - offset, 1, 0, on_extent, &a);
    if (r < 0) return -r;
    // Sorted and clipped: librbd reports per object, not necessarily in order.
    std::sort(a.runs.begin(), a.runs.end());
    std::uint64_t pos = offset;
    for (auto [at, len] : a.runs) {
        const std::uint64_t from = std::max(at, pos), to = std::min(at + len, end);
        if (to <= from) continue;
        if (!out.add(from - pos, true) || !out.add(to - from, false)) return 0;
        pos = to;
    }
    out.add(end - pos, true);
    return 0;
}

}   // namespace nbdsched::backend
