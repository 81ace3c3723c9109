// Where a RAM device's 4 KiB pages come from: 2 MiB chunks, aligned and
// marked for transparent huge pages, handed out a page at a time in order;
// pages given back are kept for the next take(). The kernel copies a large
// READ's reply straight from these pages (RamBackend::read_pinned), and on
// a virtual machine that copy slowed with every distinct 4 KiB page it
// touched: from a 1 GiB device of calloc()ed pages a 1 MiB reply over TCP
// took 1.6 ms of CPU, from huge pages 0.24 ms (docs/data-path.md). Pages taken one after another are contiguous, so
// the pieces of a sequentially written range join into few iovecs.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

namespace nbdsched::backend {

class PageArena {
public:
    static constexpr std::size_t page_bytes = 4096;
    static constexpr std::size_t chunk_bytes = std::size_t{2} << 20;   // an x86-64 huge page

    // huge: chunks marked MADV_HUGEPAGE (transparent huge pages), else
    // MADV_NOHUGEPAGE (4 KiB pages, whatever the system-wide THP mode).
    explicit PageArena(bool huge = true) : huge_(huge) {}
    ~PageArena();
    PageArena(const PageArena&) = delete;
    PageArena& operator=(const PageArena&) = delete;

    // A zeroed, page-aligned page; nullptr when memory runs out. Thread-safe.
    std::byte* take();
    // A page from take(), no longer used by anyone. Thread-safe.
    void give(std::byte* page);
    // Memory mapped for pages, in use or not.
    std::size_t mapped_bytes() const;

private:
    bool add_chunk();   // with mutex_ held

    const bool huge_;
    mutable std::mutex mutex_;
    std::vector<std::byte*> chunks_;
    std::byte* next_ = nullptr;   // the next never-used page of the last chunk
    std::byte* end_ = nullptr;
    std::vector<std::byte*> free_;
};

}   // namespace nbdsched::backend
