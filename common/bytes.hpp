// Tests on raw bytes shared by the data path's floors.
#pragma once

#include <cstddef>
#include <cstring>

namespace nbdsched {

// memcmp against the previous bytes: "first byte is zero and the rest
// equals the shifted self" is a fast, allocation-free zero test.
inline bool all_zero(const std::byte* p, std::size_t n) {
    return n == 0 || (p[0] == std::byte{0} && std::memcmp(p, p + 1, n - 1) == 0);
}

}   // namespace nbdsched
