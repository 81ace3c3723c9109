#include "common/node_pool.hpp"

// Under ASan a pooled free block is poisoned, so a use after free inside a
// scheduler's containers is still reported although the block is not freed.
#include "common/sanitizers.hpp"

namespace nbdsched::common {

namespace {
std::pmr::memory_resource& upstream() { return *std::pmr::new_delete_resource(); }
}   // namespace

NodePool::~NodePool() {
    for (std::size_t c = 0; c < kClasses; ++c) {
        while (FreeBlock* b = free_[c]) {
            NBDSCHED_UNPOISON(b, (c + 1) * kGranule);
            free_[c] = b->next;
            upstream().deallocate(b, (c + 1) * kGranule, kGranule);
        }
    }
}

[[gnu::hot]] void* NodePool::do_allocate(std::size_t bytes, std::size_t alignment) {
    const std::size_t c = size_class(bytes, alignment);
    if (c == 0) return upstream().allocate(bytes, alignment);
    if (FreeBlock* b = free_[c - 1]) {
        NBDSCHED_UNPOISON(b, c * kGranule);
        free_[c - 1] = b->next;
        return b;
    }
    return upstream().allocate(c * kGranule, kGranule);
}

[[gnu::hot]] void NodePool::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
    const std::size_t c = size_class(bytes, alignment);
    if (c == 0) {
        upstream().deallocate(p, bytes, alignment);
        return;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = free_[c - 1];
    free_[c - 1] = b;
    NBDSCHED_POISON(b, c * kGranule);
}

}   // namespace nbdsched::common
