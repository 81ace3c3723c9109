#include "daemon/device/buffer_pool.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdlib>
#include <new>
#include <vector>

namespace nbdsched::daemon::buffer_pool {

namespace {
constexpr unsigned min_shift = 12;   // 4 KiB
constexpr unsigned classes = std::bit_width(max_pooled) - min_shift;
// Free blocks kept per size class: as many as a device lets be in flight
// by default (limits.max_inflight_per_device), at most 64 MiB of them
// (4,096 of 4 KiB, 64 of 1 MiB); beyond that they are freed. It bounds
// what a burst leaves behind, and keeps steady state allocation-free.
constexpr std::size_t keep_blocks = 4096;
constexpr std::size_t keep_bytes = 64u << 20;

struct Pool {
    std::array<std::vector<std::byte*>, classes> free;
    std::size_t kept_bytes = 0;
    // Blocks taken here minus blocks given back here: a block given back on
    // another thread leaves this high, which only makes the pool keep more.
    std::int64_t in_use = 0;
    std::int64_t peak_in_use = 0;
    ~Pool();
};

// Set when this thread's pool is destroyed (thread exit): blocks given
// back later (a connection destroyed by a static destructor) are freed.
thread_local bool pool_gone = false;
thread_local Pool pool;

Pool::~Pool() {
    pool_gone = true;
    for (auto& list : free)
        for (auto* b : list) std::free(b);
}

unsigned class_of(std::size_t capacity) {
    return static_cast<unsigned>(std::bit_width(capacity - 1)) - min_shift;
}

std::byte* allocate(std::size_t size) {
    auto* p = static_cast<std::byte*>(std::aligned_alloc(alignment, size));
    if (!p) throw std::bad_alloc();
    return p;
}
}   // namespace

[[gnu::hot]] std::size_t capacity_for(std::size_t n) {
    return n > max_pooled ? (n + alignment - 1) / alignment * alignment
                          : std::bit_ceil(std::max<std::size_t>(n, alignment));
}

[[gnu::hot]] std::byte* take(std::size_t n, std::size_t& capacity) {
    capacity = capacity_for(n);
    if (pool_gone) return allocate(capacity);
    pool.in_use += static_cast<std::int64_t>(capacity);
    pool.peak_in_use = std::max(pool.peak_in_use, pool.in_use);
    if (capacity > max_pooled) return allocate(capacity);
    auto& list = pool.free[class_of(capacity)];
    if (list.empty()) return allocate(capacity);
    auto* b = list.back();
    list.pop_back();
    pool.kept_bytes -= capacity;
    return b;
}

[[gnu::hot]] void give(std::byte* block, std::size_t capacity) {
    if (!block) return;
    disown(capacity);
    give_disowned(block, capacity);
}

[[gnu::hot]] void disown(std::size_t capacity) {
    if (!pool_gone) pool.in_use -= static_cast<std::int64_t>(capacity);
}

[[gnu::hot]] void give_disowned(std::byte* block, std::size_t capacity) {
    if (!block) return;
    if (pool_gone || capacity > max_pooled) return std::free(block);
    auto& list = pool.free[class_of(capacity)];
    if (list.size() >= keep_blocks || list.size() * capacity >= keep_bytes) return std::free(block);
    list.push_back(block);
    pool.kept_bytes += capacity;
}

std::size_t peak_in_use_here() {
    if (pool_gone) return 0;
    auto peak = std::max<std::int64_t>(pool.peak_in_use, 0);
    pool.peak_in_use = pool.in_use;
    return static_cast<std::size_t>(peak);
}

std::size_t release_kept_here(std::size_t keep) {
    if (pool_gone) return 0;
    std::size_t freed = 0;
    for (unsigned c = classes; c-- > 0 && pool.kept_bytes > keep;) {
        auto& list = pool.free[c];
        const std::size_t size = std::size_t{1} << (c + min_shift);
        while (!list.empty() && pool.kept_bytes > keep) {
            std::free(list.back());
            list.pop_back();
            pool.kept_bytes -= size;
            freed += size;
        }
        if (list.empty()) std::vector<std::byte*>().swap(list);
    }
    return freed;
}

}   // namespace nbdsched::daemon::buffer_pool
