#include "daemon/device/io_limits.hpp"

#include <algorithm>
#include <bit>
#include <spdlog/spdlog.h>

#include "backend/faulty.hpp"
#include "backend/file_backend.hpp"
#include "daemon/device/buffer_pool.hpp"
#include "readahead/window.hpp"

namespace nbdsched::daemon {

namespace {

// Looks through fault injection to the backend that holds the data.
const backend::Backend& innermost(const backend::Backend& b) {
    if (auto* faulty = dynamic_cast<const backend::FaultyBackend*>(&b)) return innermost(faulty->inner());
    return b;
}

}   // namespace

IoLimits io_limits(const timing::DeviceModel* model, const backend::Backend& backend) {
    if (model) return {model->max_io_bytes(), model->optimal_io_bytes()};
    if (auto* file = dynamic_cast<const backend::FileBackend*>(&innermost(backend)))
        return {file->max_io_bytes(), file->optimal_io_bytes()};
    return {};
}

readahead::Options read_ahead_options(const config::Device& device, bool rotational, const IoLimits& limits,
                                      std::uint64_t device_size, bool latency_to_hide) {
    readahead::Options o;
    o.device_size = device_size;
    o.window_bytes = readahead::window_bytes(device.read_ahead_kb, rotational, limits.max_io_bytes,
                                             limits.optimal_io_bytes);
    // `auto` opens a window only where it hides a wait: not from RAM, where
    // a prefetch is only one more copy of each byte (docs/data-path.md),
    // and not in front of RBD, where librbd keeps every request at the OSDs at
    // once and a prefetch is one more librbd request plus a copy of its bytes
    // into the read that waited for it (1 MiB sequential reads at depth 8:
    // 1014 µs of daemon CPU each with the window, 830 without; bench exp12).
    const bool hides_latency = latency_to_hide && device.backend != config::BackendKind::rbd;
    if (!device.read_ahead_kb && !hides_latency) o.window_bytes = 0;
    o.cache_bytes = device.read_ahead_cache;
    // RAM and RBD report no maximum: one prefetch must not be a whole window
    // (up to 512 MiB), the reader waits for all of it.
    o.max_io_bytes = limits.max_io_bytes != 0 ? limits.max_io_bytes : readahead::unknown_max_io_bytes;
    const std::uint64_t capped = readahead::capped_window_bytes(o.window_bytes, o.cache_bytes, o.max_io_bytes);
    if (capped < o.window_bytes) {
        spdlog::warn("device {}: read-ahead window {} KiB cut to {} KiB, half of read_ahead_cache beside one "
                     "prefetch: a larger one evicts the unread rest of the window before it",
                     device.name, o.window_bytes >> 10, capped >> 10);
        o.window_bytes = capped;
    }
    // Prefetch buffers come from the buffer pool, which rounds sizes up.
    o.buffer_bytes = [](std::uint64_t n) -> std::uint64_t { return buffer_pool::capacity_for(n); };
    return o;
}

std::uint32_t preferred_block(const IoLimits& limits, std::uint32_t max_block) {
    auto opt = limits.optimal_io_bytes;
    if (opt >= 512 && std::has_single_bit(opt) && opt <= max_block) return opt;
    // The spec wants preferred <= maximum: a max_request_bytes under 4 KiB
    // (512 is allowed) lowers it; libnbd drops the whole size info otherwise.
    return std::bit_floor(std::clamp<std::uint32_t>(max_block, 512, 4096));
}

}   // namespace nbdsched::daemon
