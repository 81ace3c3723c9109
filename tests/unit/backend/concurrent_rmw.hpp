// A race between an O_DIRECT read-modify-write and another mutation of the
// same block, for the file backend's tests (both engines).
#pragma once

#include <doctest/doctest.h>

#include <barrier>
#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <thread>

#include "backend/file_backend.hpp"
#include "backend/file_io.hpp"
#include "pattern.hpp"

namespace nbdsched::testlib {

constexpr std::uint64_t rmw_block = 4096;
constexpr std::size_t rmw_head = 100;   // the unaligned write: the first bytes of a block

// Rounds in which a mutation of a whole block (`whole`, from this thread)
// and an unaligned write of the block's first rmw_head bytes (from another
// thread, released at the same moment) were both done, and the bytes only
// `whole` changed did not read back as `is_new` says: the read-modify-write
// wrote the block's old bytes over them. Round r uses block r, which holds
// pattern seed 1 before. `whole` starts 0 to 950 us after the unaligned
// write (by round), so that some rounds land it between the read and the
// write of the read-modify-write, whatever this disk's latency.
inline int undone_rounds(backend::FileBackend& b, int rounds, const std::function<int(std::uint64_t)>& whole,
                         const std::function<bool(std::span<const std::byte>, std::uint64_t)>& is_new) {
    REQUIRE(b.write(0, byte_pattern(0, rounds * rmw_block, 1), false) == 0);
    std::barrier together(2);
    std::thread partial([&] {
        for (int r = 0; r < rounds; ++r) {
            const std::uint64_t at = static_cast<std::uint64_t>(r) * rmw_block;
            const auto data = byte_pattern(at, rmw_head, 2);
            together.arrive_and_wait();
            CHECK(b.write(at, data, false) == 0);
            together.arrive_and_wait();
        }
    });
    int undone = 0;
    backend::AlignedBuffer back(rmw_block, rmw_block);
    for (int r = 0; r < rounds; ++r) {
        const std::uint64_t at = static_cast<std::uint64_t>(r) * rmw_block;
        together.arrive_and_wait();
        std::this_thread::sleep_for(std::chrono::microseconds(50 * (r % 20)));
        CHECK(whole(at) == 0);
        together.arrive_and_wait();
        REQUIRE(b.read(at, back.span()) == 0);
        if (!is_new(back.span().subspan(rmw_head), at + rmw_head))   // the first bytes: either write's
            ++undone;
    }
    partial.join();
    return undone;
}

}   // namespace nbdsched::testlib
