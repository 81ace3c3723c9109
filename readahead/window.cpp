#include "readahead/window.hpp"

#include <algorithm>

namespace nbdsched::readahead {

std::uint64_t auto_window_bytes(bool rotational, std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes) {
    // ra_pages = max3(ra_pages, io_opt * 2, VM_READAHEAD_PAGES), io_opt
    // falling back to max_sectors only on a rotational device without one.
    std::uint64_t io_opt = optimal_io_bytes;
    if (io_opt == 0 && rotational)
        io_opt = max_io_bytes != 0 ? max_io_bytes : unknown_max_io_bytes;
    // Never below the default: a tiny max_sectors must not shrink read-ahead.
    return std::max<std::uint64_t>(io_opt * 2, default_window_bytes);
}

std::uint64_t capped_window_bytes(std::uint64_t window_bytes, std::uint64_t cache_bytes, std::uint64_t max_io_bytes) {
    const std::uint64_t piece = max_io_bytes == 0 ? cache_bytes / 2 : std::min(max_io_bytes, cache_bytes / 2);
    return std::min(window_bytes, (cache_bytes - piece) / 2);
}

std::uint64_t window_bytes(std::optional<std::uint64_t> read_ahead_kb, bool rotational,
                           std::uint32_t max_io_bytes, std::uint32_t optimal_io_bytes) {
    if (read_ahead_kb)
        return *read_ahead_kb * 1024;
    return auto_window_bytes(rotational, max_io_bytes, optimal_io_bytes);
}

}   // namespace nbdsched::readahead
