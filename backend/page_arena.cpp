#include "backend/page_arena.hpp"

#include <cstdint>
#include <cstring>
#include <sys/mman.h>

// Under ASan a page given back is poisoned, so a use after free of a RAM
// page is still reported although the page is not unmapped.
#include "common/sanitizers.hpp"

namespace nbdsched::backend {

PageArena::~PageArena() {
    for (auto* chunk : chunks_) {
        NBDSCHED_UNPOISON(chunk, chunk_bytes);
        ::munmap(chunk, chunk_bytes);
    }
}

// Maps twice the chunk and keeps the aligned half: THP backs only whole,
// aligned 2 MiB ranges.
bool PageArena::add_chunk() {
    chunks_.reserve(chunks_.size() + 1);   // before the mapping: nothing to undo if it throws
    void* raw = ::mmap(nullptr, 2 * chunk_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return false;
    auto* base = static_cast<std::byte*>(raw);
    const auto address = reinterpret_cast<std::uintptr_t>(base);
    auto* chunk = base + ((chunk_bytes - address % chunk_bytes) % chunk_bytes);
    if (chunk != base) ::munmap(base, static_cast<std::size_t>(chunk - base));
    if (std::byte* tail = chunk + chunk_bytes; tail != base + 2 * chunk_bytes)
        ::munmap(tail, static_cast<std::size_t>(base + 2 * chunk_bytes - tail));
    // Advice: THP off or unsupported leaves 4 KiB pages either way.
    ::madvise(chunk, chunk_bytes, huge_ ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    chunks_.push_back(chunk);
    next_ = chunk;
    end_ = chunk + chunk_bytes;
    return true;
}

[[gnu::hot]] std::byte* PageArena::take() {
    std::byte* page = nullptr;
    {
        std::lock_guard lock(mutex_);
        if (!free_.empty()) {
            page = free_.back();
            free_.pop_back();
        } else {
            if (next_ == end_ && !add_chunk()) return nullptr;
            page = next_;
            next_ += page_bytes;
            return page;   // never used: still zero from mmap
        }
    }
    NBDSCHED_UNPOISON(page, page_bytes);
    std::memset(page, 0, page_bytes);
    return page;
}

void PageArena::give(std::byte* page) {
    NBDSCHED_POISON(page, page_bytes);
    std::lock_guard lock(mutex_);
    free_.push_back(page);
}

std::size_t PageArena::mapped_bytes() const {
    std::lock_guard lock(mutex_);
    return chunks_.size() * chunk_bytes;
}

}   // namespace nbdsched::backend
