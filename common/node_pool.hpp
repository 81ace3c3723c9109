// NodePool: the memory resource of one owner's node-based containers
// (std::pmr map/set/list/unordered_map): a scheduler's, the read-ahead
// cache's and its in-flight tables. Every request used to allocate and
// free several tree and list nodes on its way through cfq/bfq, and malloc/free
// were a third of the scheduler's instructions with many queues; the pool
// keeps freed blocks in per-size free lists for the next insert instead.
// It never returns memory before it is destroyed, so it holds the peak
// footprint of its owner (bounded by the requests, queues or extents it held
// at once). Not thread-safe, like the owners; they declare it before the
// containers that use it, so it outlives them.
#pragma once

#include <array>
#include <cstddef>
#include <memory_resource>

namespace nbdsched::common {

class NodePool final : public std::pmr::memory_resource {
public:
    NodePool() = default;
    NodePool(const NodePool&) = delete;
    NodePool& operator=(const NodePool&) = delete;
    ~NodePool() override;

private:
    // Blocks of up to kClasses * kGranule bytes are pooled by size class;
    // larger ones (hash bucket arrays) go straight to new/delete.
    static constexpr std::size_t kGranule = alignof(std::max_align_t);
    static constexpr std::size_t kClasses = 16;
    struct FreeBlock {
        FreeBlock* next;
    };

    // 1-based class of a poolable block, 0 when it is not pooled.
    static constexpr std::size_t size_class(std::size_t bytes, std::size_t alignment) {
        if (alignment > kGranule || bytes == 0 || bytes > kClasses * kGranule) return 0;
        return (bytes + kGranule - 1) / kGranule;
    }

    void* do_allocate(std::size_t bytes, std::size_t alignment) override;
    void do_deallocate(void* p, std::size_t bytes, std::size_t alignment) override;
    bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
        return this == &other;
    }

    std::array<FreeBlock*, kClasses> free_{};
};

}   // namespace nbdsched::common
