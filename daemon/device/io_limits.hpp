// A device's I/O sizes, from whatever describes it best: the timing model
// when a profile is set (the emulated disk is what clients see), else the
// storage under a file backend (sysfs), else unknown. They size read-ahead
// (`read_ahead_kb: auto`) and NBD_INFO_BLOCK_SIZE's preferred size.
#pragma once

#include <cstdint>

#include "backend/backend.hpp"
#include "readahead/readahead.hpp"
#include "timing/device_model.hpp"
#include "config/config.hpp"

namespace nbdsched::daemon {

struct IoLimits {
    std::uint32_t max_io_bytes = 0;       // 0 = unknown
    std::uint32_t optimal_io_bytes = 0;   // 0 = none reported
};

IoLimits io_limits(const timing::DeviceModel* model, const backend::Backend& backend);

// The read-ahead the device runs with (window_bytes 0 = off; at most half
// of read_ahead_cache beside one prefetch piece, logged when cut; split at the maximum I/O size, 1280 KiB
// when unknown). `auto` is off
// when there is no latency to hide: no timing model and a backend that
// answers inline (RAM), where a window only adds a copy per read.
readahead::Options read_ahead_options(const config::Device& device, bool rotational, const IoLimits& limits,
                                      std::uint64_t device_size, bool latency_to_hide);

// NBD_INFO_BLOCK_SIZE preferred size: the optimal I/O size when there is a
// usable one (a power of two in [512, max_block]), else 4096, or the largest
// power of two not above max_block when that is smaller (never under 512).
std::uint32_t preferred_block(const IoLimits& limits, std::uint32_t max_block);

}   // namespace nbdsched::daemon
