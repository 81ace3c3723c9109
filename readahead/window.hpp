// Read-ahead window sizing (seed 004): on a rotational device that reports
// no optimal I/O size the window is 2 x the maximum I/O size (2560 KiB with
// the usual 1280 KiB max_sectors_kb), as the kernel's block layer does;
// otherwise the kernel default of 128 KiB. read_ahead_kb: 0 turns it off.
#pragma once

#include <cstdint>
#include <optional>

namespace nbdsched::readahead {

inline constexpr std::uint64_t default_window_bytes = 128 << 10;

// `read_ahead_kb: auto` for a device with these properties. max_io_bytes 0
// (unknown) counts as 1280 KiB, the common default max_sectors_kb.
std::uint64_t auto_window_bytes(bool rotational, std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes);

// The configured value: nullopt = auto, else N KiB (0 = read-ahead off).
std::uint64_t window_bytes(std::optional<std::uint64_t> read_ahead_kb, bool rotational,
                           std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes);

}   // namespace nbdsched::readahead
