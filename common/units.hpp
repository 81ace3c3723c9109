// Parsing and printing of the units used in configuration files, tunables and
// the control socket: byte sizes ("512MiB", "4k") and durations ("8ms", "100us").
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nbdsched {

using Nanos = std::chrono::nanoseconds;

// "4096", "4k", "4KiB", "1.5GiB", "2M", "1T". K/M/G/T and KiB/MiB/... are powers
// of 1024 (as in qemu-img and nbdkit); "KB"/"MB" are accepted as the same.
// Returns nullopt on garbage or overflow.
std::optional<std::uint64_t> parse_size(std::string_view text);

// "8ms", "100us", "1.5s", "250000ns", "1min", "1h". A bare number is taken in `bare_unit`
// (the kernel's sysfs tunables are bare milliseconds). Negative is an error.
std::optional<Nanos> parse_duration(std::string_view text, Nanos bare_unit = std::chrono::milliseconds(1));

// Human forms used in logs and `ctl` output: "1GiB", "8ms", "150us".
std::string format_size(std::uint64_t bytes);
std::string format_duration(Nanos d);

}   // namespace nbdsched
