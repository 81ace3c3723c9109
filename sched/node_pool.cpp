#include "sched/node_pool.hpp"

namespace nbdsched::sched {

namespace {
std::pmr::memory_resource& upstream() { return *std::pmr::new_delete_resource(); }
} // namespace

NodePool::~NodePool() {
    for (std::size_t c = 0; c < kClasses; ++c) {
        while (FreeBlock* b = free_[c]) {
            free_[c] = b->next;
            upstream().deallocate(b, (c + 1) * kGranule, kGranule);
        }
    }
}

void* NodePool::do_allocate(std::size_t bytes, std::size_t alignment) {
    const std::size_t c = size_class(bytes, alignment);
    if (c == 0) return upstream().allocate(bytes, alignment);
    if (FreeBlock* b = free_[c - 1]) {
        free_[c - 1] = b->next;
        return b;
    }
    return upstream().allocate(c * kGranule, kGranule);
}

void NodePool::do_deallocate(void* p, std::size_t bytes, std::size_t alignment) {
    const std::size_t c = size_class(bytes, alignment);
    if (c == 0) {
        upstream().deallocate(p, bytes, alignment);
        return;
    }
    auto* b = static_cast<FreeBlock*>(p);
    b->next = free_[c - 1];
    free_[c - 1] = b;
}

} // namespace nbdsched::sched
