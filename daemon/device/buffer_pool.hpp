// Request data buffers, shared by everything running on one thread: a
// request takes a buffer when it needs one and gives it back when its
// reply has left, so steady-state I/O allocates nothing and an idle
// connection holds no data buffers (docs/data-path.md, memory).
#pragma once

#include <cstddef>
#include <cstdint>

namespace nbdsched::daemon::buffer_pool {

// Aligned for O_DIRECT. Sizes up to max_pooled are rounded up to a power
// of two (from 4 KiB) and recycled; larger ones are allocated each time.
inline constexpr std::size_t alignment = 4096;
inline constexpr std::size_t max_pooled = 1u << 20;

// The size of the block take(n) hands out.
std::size_t capacity_for(std::size_t n);
// At least `n` bytes; `capacity` gets the block's size. Throws std::bad_alloc.
std::byte* take(std::size_t n, std::size_t& capacity);
// A block from take() (or nullptr). Any thread may give back any block.
void give(std::byte* block, std::size_t capacity);
// A block from take() is no longer held by this thread's requests (the
// read-ahead cache keeps a prefetch's buffer): it stops counting as in use.
// Its owner frees it, or gives it back with give_disowned().
void disown(std::size_t capacity);
// Gives back a block disown()ed earlier (the read-ahead cache dropped it),
// to be taken again as give() does, without counting it as no longer in use
// twice. Any thread.
void give_disowned(std::byte* block, std::size_t capacity);

// The most bytes this thread's requests held at once (taken, not yet
// given back) since the last call; the count starts again from what they
// hold now.
std::size_t peak_in_use_here();
// Frees blocks this thread's pool keeps, the largest first, until it keeps
// at most `keep` bytes; the bytes freed.
std::size_t release_kept_here(std::size_t keep);

// A unique_ptr deleter that gives its block back.
struct Give {
    std::size_t capacity = 0;
    void operator()(std::byte* p) const { give(p, capacity); }
};

}   // namespace nbdsched::daemon::buffer_pool
