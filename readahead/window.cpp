#include "readahead/window.hpp"

namespace nbdsched::readahead {

std::uint64_t auto_window_bytes(bool rotational, std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes) {
    if (!rotational || optimal_io_bytes != 0)
        return default_window_bytes;
    const std::uint64_t max_io = max_io_bytes != 0 ? max_io_bytes : 1280u << 10;
    // Never below the default: a tiny max_sectors must not shrink read-ahead.
    return max_io * 2 > default_window_bytes ? max_io * 2 : default_window_bytes;
}

std::uint64_t window_bytes(std::optional<std::uint64_t> read_ahead_kb, bool rotational,
                           std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes) {
    if (read_ahead_kb)
        return *read_ahead_kb * 1024;
    return auto_window_bytes(rotational, max_io_bytes, optimal_io_bytes);
}

}   // namespace nbdsched::readahead
