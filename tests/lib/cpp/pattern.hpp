// Deterministic test data: each byte depends on its absolute device offset
// and a seed, so any sub-range of a write can be checked on its own and a
// misplaced or stale copy shows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace nbdsched::testlib {

std::uint8_t pattern_byte(std::uint64_t position, std::uint32_t seed);

// The bytes of [offset, offset + len) for `seed`, as raw bytes (sockets,
// libnbd) or as std::byte (the backend interfaces).
std::vector<std::uint8_t> pattern(std::uint64_t offset, std::size_t len, std::uint32_t seed = 1);
std::vector<std::byte> byte_pattern(std::uint64_t offset, std::size_t len, std::uint32_t seed = 1);

// True when `data`, read from `offset`, is pattern(offset, data.size(), seed).
bool is_pattern(std::span<const std::byte> data, std::uint64_t offset, std::uint32_t seed = 1);
bool all_zero(std::span<const std::byte> data);

}   // namespace nbdsched::testlib
