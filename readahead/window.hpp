// Read-ahead window sizing (seed 004, blk_apply_bdi_limits): 2 x the optimal
// I/O size, where a rotational device that reports none counts its maximum
// I/O size instead (2560 KiB with the usual 1280 KiB max_sectors_kb); never
// below the kernel default of 128 KiB. read_ahead_kb: 0 turns it off.
#pragma once

#include <cstdint>
#include <optional>

namespace nbdsched::readahead {

inline constexpr std::uint64_t default_window_bytes = 128 << 10;

// The common default max_sectors_kb, for a device whose maximum I/O size is unknown.
inline constexpr std::uint32_t unknown_max_io_bytes = 1280u << 10;

// `read_ahead_kb: auto` for a device with these properties. max_io_bytes 0
// (unknown) counts as unknown_max_io_bytes.
std::uint64_t auto_window_bytes(bool rotational, std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes);

// At most half of the cache left beside one prefetch piece (max_io_bytes,
// 0 = unsplit: taken as half the cache): a larger window evicts the unread
// rest of the one before it, whose last piece the reader is still in (the
// reader misses, the window halves, grows again: 4x the data read from the
// device).
std::uint64_t capped_window_bytes(std::uint64_t window_bytes, std::uint64_t cache_bytes, std::uint64_t max_io_bytes);

// The configured value: nullopt = auto, else N KiB (0 = read-ahead off).
std::uint64_t window_bytes(std::optional<std::uint64_t> read_ahead_kb, bool rotational,
                           std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes);

}   // namespace nbdsched::readahead
