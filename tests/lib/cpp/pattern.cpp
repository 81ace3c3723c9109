#include "pattern.hpp"

#include <algorithm>

namespace nbdsched::testlib {

std::uint8_t pattern_byte(std::uint64_t position, std::uint32_t seed) {
    // A cheap 64-bit mix of (position, seed); never constant over a block.
    std::uint64_t x = position * 0x9E3779B97F4A7C15ull ^ (std::uint64_t{seed} << 32);
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    return static_cast<std::uint8_t>(x);
}

std::vector<std::uint8_t> pattern(std::uint64_t offset, std::size_t len, std::uint32_t seed) {
    std::vector<std::uint8_t> out(len);
    for (std::size_t i = 0; i < len; ++i) out[i] = pattern_byte(offset + i, seed);
    return out;
}

std::vector<std::byte> byte_pattern(std::uint64_t offset, std::size_t len, std::uint32_t seed) {
    std::vector<std::byte> out(len);
    for (std::size_t i = 0; i < len; ++i) out[i] = std::byte{pattern_byte(offset + i, seed)};
    return out;
}

bool is_pattern(std::span<const std::byte> data, std::uint64_t offset, std::uint32_t seed) {
    for (std::size_t i = 0; i < data.size(); ++i)
        if (data[i] != std::byte{pattern_byte(offset + i, seed)}) return false;
    return true;
}

bool all_zero(std::span<const std::byte> data) {
    return std::all_of(data.begin(), data.end(), [](std::byte b) { return b == std::byte{0}; });
}

}   // namespace nbdsched::testlib
