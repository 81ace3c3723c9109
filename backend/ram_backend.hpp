// Sparse, thread-safe RAM backend. Memory is taken a 4 KiB page at a time
// (from a PageArena: huge pages) on the first write that is not all zeros;
// never-written pages read as zeros and cost nothing. A payload received in
// place (write_pinned) gets every page of its range before anyone has seen
// it; unpin_written() then gives back the pages that write created and left
// all zeros, so zeros cost nothing whichever way they are written (pages
// that were there before stay, as with write()). TRIM and WRITE_ZEROES free the whole pages they cover and
// zero the partial ones; WRITE_ZEROES with NBD_CMD_FLAG_NO_HOLE (may_trim
// false) instead allocates zero-filled pages for the whole range, as the spec
// asks. Volatile by design: FLUSH and FUA are no-ops.
//
// Layout: a fixed top table (one slot per 16 MiB "leaf") of atomic pointers
// to leaf tables of 4096 atomic page pointers, both allocated lazily with a
// CAS. Reads and writes hold a striped shared lock on their leaf (one atomic
// RMW, uncontended in practice); freeing pages takes the stripe exclusively,
// so a page is never freed under a reader's memcpy. A page freed while a
// read_pinned() or write_pinned() that may reach it is outstanding waits for
// its unpin() (PagePins): a reply being sent from it never reads freed
// memory, and a payload being received into it never writes freed memory.
//
// Which pages a write in place created: a bit per page in its leaf
// (`fresh`), set by write_pinned() as it allocates the page (under the
// shared stripe, before the page is in its slot) and cleared by the
// unpin_written() whose range covers it, by a free, and by NO_HOLE zeroes
// (not by unpin(): the next unpin_written() over the page settles it).
// unpin_written() looks at the fresh pages of its range under the shared
// stripe (the first non-zero byte ends a page's test: data costs a load per
// page) and frees the all-zero ones under the exclusive stripe, testing them
// again and only if their slot still holds the page it saw; a pin that may
// reach one retires it as a TRIM's would. A leaf table it leaves with no
// page is dropped, as a TRIM of the whole leaf drops it. Only pages the range covers whole
// are freed: a write in flight to another part of a page keeps it. A write
// in flight to the same page may lose its bytes to the free (its pages were
// found before), which NBD allows for overlapping writes in flight together:
// the freeing write's zeros came last.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "backend/backend.hpp"
#include "backend/page_arena.hpp"
#include "backend/page_pins.hpp"

namespace nbdsched::backend {

class RamBackend final : public Backend {
public:
    static constexpr std::uint64_t page_bytes = 4096;
    static constexpr std::uint64_t pages_per_leaf = 4096;                // 16 MiB per leaf
    static constexpr std::uint64_t max_size = std::uint64_t{64} << 40;   // 64 TiB

    // size must be 1..max_size (the factory validates and reports errors).
    // huge_pages: the pages come from transparent huge pages (PageArena).
    explicit RamBackend(std::uint64_t size, bool huge_pages = true);
    ~RamBackend() override;
    RamBackend(const RamBackend&) = delete;
    RamBackend& operator=(const RamBackend&) = delete;

    std::uint64_t size() const override { return size_; }
    bool blocking() const override { return false; }
    std::optional<bool> detected_rotational() const override { return std::nullopt; }
    std::string describe() const override;
    // Allocated pages, pages freed while pinned (until their pins end) and
    // the page tables. The arena's free pages are not counted: it keeps them
    // mapped for the next writes, so a TRIM lowers this, not the RSS.
    std::optional<std::uint64_t> memory_bytes() const override;

    int read(std::uint64_t offset, std::span<std::byte> out) override;
    std::optional<PinId> read_pinned(std::uint64_t offset, std::uint64_t length,
                                     std::vector<std::span<const std::byte>>& out) override;
    // Allocates every page of the range (unpin_written() gives back those
    // it created that the payload left all zeros); nullopt, nothing pinned
    // and nothing left allocated when memory runs out.
    std::optional<PinId> write_pinned(std::uint64_t offset, std::uint64_t length,
                                      std::vector<std::span<std::byte>>& out) override;
    bool writes_to_memory() const override { return true; }
    void unpin(PinId pin) override { pins_.unpin(pin); }
    // unpin(pin), then the pages write_pinned() created in the range that are
    // all zeros go back to being holes (a connection closed mid-payload too:
    // pages nothing was received into are given back).
    void unpin_written(PinId pin, std::uint64_t offset, std::uint64_t length) override;
    int write(std::uint64_t offset, std::span<const std::byte> data, bool fua) override;
    int flush() override { return 0; }
    int trim(std::uint64_t offset, std::uint64_t length, bool fua) override;
    int write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;
    // Freeing or allocating pages is always cheap next to writing zeros.
    int write_zeroes_fast(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override {
        return write_zeroes(offset, length, may_trim, fua);
    }
    // Pages never written (or freed again by TRIM / WRITE_ZEROES) are holes.
    int extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) override;

    // Bytes of data pages currently allocated (page tables not included).
    std::uint64_t allocated_bytes() const { return allocated_pages_.load(std::memory_order_relaxed) * page_bytes; }
    // Pages freed while pinned, waiting for the pins that may reach them.
    std::size_t retired_pages() const { return pins_.retired(); }
    // Bytes of the page tables (top table plus allocated leaves).
    std::uint64_t metadata_bytes() const;

private:
    struct Leaf;
    struct alignas(64) Stripe {
        std::shared_mutex mutex;
    };
    static constexpr std::size_t stripe_count = 64;

    bool in_range(std::uint64_t offset, std::uint64_t length) const;
    // A page taken out of its table: freed now, or once no pin can reach it.
    void free_page(std::byte* page);
    Stripe& stripe_of(std::uint64_t leaf_index) { return stripes_[leaf_index % stripe_count]; }
    Leaf* leaf_or_null(std::uint64_t leaf_index) const;
    Leaf* leaf_or_create(std::uint64_t leaf_index);
    // fresh: mark a page this call creates as write_pinned()'s (see above).
    std::byte* page_or_create(Leaf& leaf, std::uint64_t slot, bool fresh = false);
    // Frees the fresh pages of [offset, offset+length) inside one leaf that
    // hold only zeros and clears the fresh marks of the range.
    void settle_in_leaf(std::uint64_t leaf_index, std::uint64_t offset, std::uint64_t length);
    void drop_leaf(std::uint64_t leaf_index, Leaf* leaf);
    // Zeroes [offset, offset+length) inside one leaf, freeing whole pages.
    void zero_in_leaf(std::uint64_t leaf_index, std::uint64_t offset, std::uint64_t length);
    // Zeroes [offset, offset+length) inside one leaf, allocating every page it
    // touches (NO_HOLE); false when memory runs out.
    bool provision_in_leaf(std::uint64_t leaf_index, std::uint64_t offset, std::uint64_t length);

    PageArena arena_;   // declared first, destroyed last: every page below lives in it
    std::uint64_t size_;
    std::uint64_t leaf_count_;
    std::unique_ptr<std::atomic<Leaf*>[]> leaves_;
    std::atomic<std::uint64_t> allocated_pages_{0};
    std::atomic<std::uint64_t> allocated_leaves_{0};
    std::array<Stripe, stripe_count> stripes_;
    PagePins pins_{arena_};
};

}   // namespace nbdsched::backend
