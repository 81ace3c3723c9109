#include "backend/ram_backend.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "common/device_bytes.hpp"
#include "common/units.hpp"

namespace nbdsched::backend {

namespace {

constexpr std::uint64_t leaf_bytes = RamBackend::page_bytes * RamBackend::pages_per_leaf;

// Calls fn(leaf_index, offset, length) for each piece of the range that lies
// in one leaf; stops early (returning false) when fn returns false.
template <class Fn>
bool for_each_leaf(std::uint64_t offset, std::uint64_t length, Fn&& fn) {
    for (std::uint64_t done = 0; done < length;) {
        const std::uint64_t pos = offset + done;
        const std::uint64_t li = pos / leaf_bytes;
        const std::uint64_t chunk = std::min(length - done, (li + 1) * leaf_bytes - pos);
        if (!fn(li, pos, chunk))
            return false;
        done += chunk;
    }
    return true;
}

// Calls fn(slot in the leaf, offset in the page, bytes, device offset) for
// each page piece of a range inside one leaf; stops when fn returns false.
template <class Fn>
bool for_each_page(std::uint64_t offset, std::uint64_t length, Fn&& fn) {
    for (std::uint64_t c = 0; c < length;) {
        const std::uint64_t at = offset + c;
        const std::uint64_t in_page = at % RamBackend::page_bytes;
        const std::uint64_t n = std::min(length - c, RamBackend::page_bytes - in_page);
        if (!fn((at / RamBackend::page_bytes) % RamBackend::pages_per_leaf, in_page, n, at))
            return false;
        c += n;
    }
    return true;
}

// What a pinned read of a hole points at: never written, so its pages are
// the kernel's shared zero page and cost no memory.
constexpr std::size_t zero_block_bytes = 1u << 20;
alignas(4096) std::byte zero_block[zero_block_bytes];

// Appends n bytes at p to out, joining it to the last piece when contiguous.
template <class Byte>
void append_piece(std::vector<std::span<Byte>>& out, Byte* p, std::size_t n) {
    if (!out.empty() && out.back().data() + out.back().size() == p) {
        out.back() = {out.back().data(), out.back().size() + n};
        return;
    }
    out.emplace_back(p, n);
}

// n zero bytes: more of the zero block after the last piece when it fits.
void append_zeros(std::vector<std::span<const std::byte>>& out, std::size_t n) {
    const std::byte* end = zero_block + zero_block_bytes;
    if (!out.empty() && out.back().data() >= zero_block && out.back().data() + out.back().size() + n <= end)
        return append_piece<const std::byte>(out, out.back().data() + out.back().size(), n);
    out.emplace_back(zero_block, n);
}

}   // namespace

struct RamBackend::Leaf {
    static constexpr std::uint64_t word_pages = 64;

    std::atomic<std::byte*> pages[RamBackend::pages_per_leaf] = {};
    // The pages write_pinned() created and no unpin_written() has looked at:
    // bit slot % 64 of word slot / 64 (see ram_backend.hpp).
    std::atomic<std::uint64_t> fresh[RamBackend::pages_per_leaf / word_pages] = {};

    static std::uint64_t bit(std::uint64_t slot) { return std::uint64_t{1} << (slot % word_pages); }
    void mark(std::uint64_t slot) { fresh[slot / word_pages].fetch_or(bit(slot), std::memory_order_relaxed); }
    void unmark(std::uint64_t slot) {
        auto& word = fresh[slot / word_pages];
        if (word.load(std::memory_order_relaxed) & bit(slot)) word.fetch_and(~bit(slot), std::memory_order_relaxed);
    }
};

RamBackend::RamBackend(std::uint64_t size, bool huge_pages)
    : arena_(huge_pages),
      size_(size),
      leaf_count_((size + leaf_bytes - 1) / leaf_bytes),
      leaves_(std::make_unique<std::atomic<Leaf*>[]>(leaf_count_)) {
}

RamBackend::~RamBackend() {
    for (std::uint64_t i = 0; i < leaf_count_; ++i) {
        Leaf* leaf = leaves_[i].load(std::memory_order_relaxed);
        if (leaf == nullptr)
            continue;
        delete leaf;   // its pages go with arena_
    }
}

std::string RamBackend::describe() const {
    return "ram " + format_size(size_);
}

std::uint64_t RamBackend::metadata_bytes() const {
    return leaf_count_ * sizeof(std::atomic<Leaf*>) + allocated_leaves_.load(std::memory_order_relaxed) * sizeof(Leaf);
}

std::optional<std::uint64_t> RamBackend::memory_bytes() const {
    return allocated_bytes() + retired_pages() * page_bytes + metadata_bytes();
}

[[gnu::hot]] bool RamBackend::in_range(std::uint64_t offset, std::uint64_t length) const {
    return offset <= size_ && length <= size_ - offset;
}

[[gnu::hot]] RamBackend::Leaf* RamBackend::leaf_or_null(std::uint64_t leaf_index) const {
    return leaves_[leaf_index].load(std::memory_order_acquire);
}

RamBackend::Leaf* RamBackend::leaf_or_create(std::uint64_t leaf_index) {
    Leaf* leaf = leaf_or_null(leaf_index);
    if (leaf != nullptr)
        return leaf;
    auto* fresh = new (std::nothrow) Leaf;
    if (fresh == nullptr)
        return nullptr;
    if (leaves_[leaf_index].compare_exchange_strong(leaf, fresh, std::memory_order_acq_rel)) {
        allocated_leaves_.fetch_add(1, std::memory_order_relaxed);
        return fresh;
    }
    delete fresh;   // another writer won the race; `leaf` now holds its table
    return leaf;
}

// A fresh mark goes on before the page is in its slot, so that NO_HOLE
// zeroes finding the page clear it after. Losing the race for the slot takes
// the mark off again: whoever won (a write in place too, maybe) keeps its
// page, which is never wrong, only not given back.
[[gnu::hot]] std::byte* RamBackend::page_or_create(Leaf& leaf, std::uint64_t slot, bool fresh) {
    std::byte* page = leaf.pages[slot].load(std::memory_order_acquire);
    if (page != nullptr)
        return page;
    auto* taken = arena_.take();
    if (taken == nullptr)
        return nullptr;
    if (fresh)
        leaf.mark(slot);
    if (leaf.pages[slot].compare_exchange_strong(page, taken, std::memory_order_acq_rel)) {
        allocated_pages_.fetch_add(1, std::memory_order_relaxed);
        return taken;
    }
    if (fresh)
        leaf.unmark(slot);
    arena_.give(taken);
    return page;
}

[[gnu::hot]] int RamBackend::read(std::uint64_t offset, std::span<std::byte> out) {
    if (!in_range(offset, out.size()))
        return EINVAL;
    for_each_leaf(offset, out.size(), [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        std::shared_lock lock(stripe_of(li).mutex);
        const Leaf* leaf = leaf_or_null(li);
        return for_each_page(pos, chunk, [&](std::uint64_t slot, std::uint64_t in_page, std::uint64_t n, std::uint64_t at) {
            std::byte* dst = out.data() + (at - offset);
            const std::byte* page = leaf == nullptr ? nullptr : leaf->pages[slot].load(std::memory_order_acquire);
            if (page != nullptr)
                copy_device_bytes(dst, page + in_page, n);
            else
                std::memset(dst, 0, n);
            return true;
        });
    });
    return 0;
}

// The pin comes first: a page freed after it (under the stripe held
// exclusively, so after or before our look at its table) sees it and retires.
std::optional<PinId> RamBackend::read_pinned(std::uint64_t offset, std::uint64_t length,
                                             std::vector<std::span<const std::byte>>& out) {
    if (!in_range(offset, length))
        return std::nullopt;
    const PinId pin = pins_.pin();
    for_each_leaf(offset, length, [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        std::shared_lock lock(stripe_of(li).mutex);
        const Leaf* leaf = leaf_or_null(li);
        return for_each_page(pos, chunk, [&](std::uint64_t slot, std::uint64_t in_page, std::uint64_t n, std::uint64_t) {
            const std::byte* page = leaf == nullptr ? nullptr : leaf->pages[slot].load(std::memory_order_acquire);
            if (page != nullptr)
                append_piece<const std::byte>(out, page + in_page, n);
            else
                append_zeros(out, n);
            return true;
        });
    });
    return pin;
}

// As read_pinned(), the pin first; then every page is allocated (shared
// stripe, like write()). A page a TRIM takes out of its table after we let go
// of the stripe retires while we hold the pin: what is received into it is
// lost, which NBD allows as the TRIM and the WRITE were in flight together.
std::optional<PinId> RamBackend::write_pinned(std::uint64_t offset, std::uint64_t length,
                                              std::vector<std::span<std::byte>>& out) {
    if (!in_range(offset, length))
        return std::nullopt;
    const PinId pin = pins_.pin();
    const bool ok = for_each_leaf(offset, length, [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        std::shared_lock lock(stripe_of(li).mutex);
        Leaf* leaf = leaf_or_create(li);
        if (leaf == nullptr)
            return false;
        return for_each_page(pos, chunk, [&](std::uint64_t slot, std::uint64_t in_page, std::uint64_t n, std::uint64_t) {
            std::byte* page = page_or_create(*leaf, slot, true);
            if (page == nullptr)
                return false;
            append_piece(out, page + in_page, n);
            return true;
        });
    });
    if (ok)
        return pin;
    out.clear();
    unpin_written(pin, offset, length);   // the pages taken so far are zero: holes again
    return std::nullopt;
}

// Ours is done with the pages, so our pin goes first: a page freed below
// retires only for the pins of others.
void RamBackend::unpin_written(PinId pin, std::uint64_t offset, std::uint64_t length) {
    pins_.unpin(pin);
    if (length == 0 || !in_range(offset, length))
        return;
    for_each_leaf(offset, length, [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        settle_in_leaf(li, pos, chunk);
        return true;
    });
}

// One word of fresh marks (64 pages) at a time: the zero test runs under the
// shared stripe, beside reads and writes; the pages found all zero are
// tested again under the exclusive stripe and freed if their slot still
// holds them (a TRIM and a new write in place may have been there between).
// A table left with no page goes too, so that zeros over a leaf never
// written cost nothing, not even the table (33 KiB per 16 MiB).
void RamBackend::settle_in_leaf(std::uint64_t li, std::uint64_t offset, std::uint64_t length) {
    const std::uint64_t base = li * pages_per_leaf;   // the leaf's first page
    const std::uint64_t first = offset / page_bytes - base;
    const std::uint64_t end = (offset + length + page_bytes - 1) / page_bytes - base;   // pages touched
    const std::uint64_t whole_first = (offset + page_bytes - 1) / page_bytes - base;
    const std::uint64_t whole_end = (offset + length) / page_bytes - base;   // pages covered whole
    auto bits = [](std::uint64_t from, std::uint64_t to, std::uint64_t word) -> std::uint64_t {
        const std::uint64_t lo = std::max(from, word * Leaf::word_pages), hi = std::min(to, (word + 1) * Leaf::word_pages);
        if (lo >= hi)
            return 0;
        const std::uint64_t n = hi - lo;
        return (n == Leaf::word_pages ? ~std::uint64_t{0} : (std::uint64_t{1} << n) - 1) << (lo % Leaf::word_pages);
    };
    bool freed = false;
    for (std::uint64_t w = first / Leaf::word_pages; w * Leaf::word_pages < end; ++w) {
        const std::uint64_t touched = bits(first, end, w), whole = bits(whole_first, whole_end, w);
        std::array<std::byte*, Leaf::word_pages> seen;
        std::uint64_t zero = 0;
        const Leaf* seen_leaf = nullptr;
        {
            std::shared_lock lock(stripe_of(li).mutex);
            Leaf* leaf = leaf_or_null(li);
            if (leaf == nullptr)
                return;   // trimmed whole meanwhile: nothing of ours left
            seen_leaf = leaf;
            std::uint64_t kept = 0;
            for (std::uint64_t m = leaf->fresh[w].load(std::memory_order_relaxed) & touched; m != 0; m &= m - 1) {
                const int b = std::countr_zero(m);
                std::byte* page = leaf->pages[w * Leaf::word_pages + b].load(std::memory_order_acquire);
                if (page == nullptr)
                    continue;   // being created by another write in place: its mark
                seen[b] = page;
                if ((whole >> b & 1) != 0 && device_bytes_zero(page, page_bytes))
                    zero |= std::uint64_t{1} << b;
                else
                    kept |= std::uint64_t{1} << b;
            }
            if (kept != 0)
                leaf->fresh[w].fetch_and(~kept, std::memory_order_relaxed);
        }
        if (zero == 0)
            continue;
        std::unique_lock lock(stripe_of(li).mutex);
        Leaf* leaf = leaf_or_null(li);
        if (leaf != seen_leaf)
            return;   // the table was dropped (and maybe made again): its pages are not the ones we saw
        for (std::uint64_t m = zero & leaf->fresh[w].load(std::memory_order_relaxed); m != 0; m &= m - 1) {
            const int b = std::countr_zero(m);
            const std::uint64_t slot = w * Leaf::word_pages + b;
            if (leaf->pages[slot].load(std::memory_order_relaxed) != seen[b])
                continue;   // another page now: another write's
            leaf->unmark(slot);
            if (device_bytes_zero(seen[b], page_bytes)) {
                leaf->pages[slot].store(nullptr, std::memory_order_release);
                free_page(seen[b]);
                freed = true;
            }
        }
    }
    if (!freed)
        return;
    std::unique_lock lock(stripe_of(li).mutex);
    Leaf* leaf = leaf_or_null(li);
    if (leaf != nullptr && std::none_of(std::begin(leaf->pages), std::end(leaf->pages), [](const auto& p) {
            return p.load(std::memory_order_relaxed) != nullptr;
        }))
        drop_leaf(li, leaf);
}

// With the stripe held exclusively and no page left in the table.
void RamBackend::drop_leaf(std::uint64_t li, Leaf* leaf) {
    leaves_[li].store(nullptr, std::memory_order_release);
    delete leaf;
    allocated_leaves_.fetch_sub(1, std::memory_order_relaxed);
}

void RamBackend::free_page(std::byte* page) {
    allocated_pages_.fetch_sub(1, std::memory_order_relaxed);
    pins_.free_page(page);
}

[[gnu::hot]] int RamBackend::write(std::uint64_t offset, std::span<const std::byte> data, bool /*fua*/) {
    if (!in_range(offset, data.size()))
        return EINVAL;
    const bool ok = for_each_leaf(offset, data.size(), [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        std::shared_lock lock(stripe_of(li).mutex);
        Leaf* leaf = leaf_or_null(li);
        return for_each_page(pos, chunk, [&](std::uint64_t slot, std::uint64_t in_page, std::uint64_t n, std::uint64_t at) {
            const std::byte* src = data.data() + (at - offset);
            std::byte* page = leaf == nullptr ? nullptr : leaf->pages[slot].load(std::memory_order_acquire);
            if (page == nullptr && !all_zero(src, n)) {
                // Zeros written over a hole stay a hole: nothing to allocate.
                if (leaf == nullptr && (leaf = leaf_or_create(li)) == nullptr)
                    return false;
                if ((page = page_or_create(*leaf, slot)) == nullptr)
                    return false;
            }
            if (page != nullptr)
                copy_device_bytes(page + in_page, src, n);
            return true;
        });
    });
    return ok ? 0 : ENOSPC;
}

void RamBackend::zero_in_leaf(std::uint64_t li, std::uint64_t offset, std::uint64_t length) {
    std::unique_lock lock(stripe_of(li).mutex);
    Leaf* leaf = leaf_or_null(li);
    if (leaf == nullptr)
        return;
    for_each_page(offset, length, [&](std::uint64_t slot, std::uint64_t in_page, std::uint64_t n, std::uint64_t) {
        if (n == page_bytes) {
            if (std::byte* page = leaf->pages[slot].exchange(nullptr, std::memory_order_acq_rel)) {
                leaf->unmark(slot);
                free_page(page);
            }
        } else if (std::byte* page = leaf->pages[slot].load(std::memory_order_acquire)) {
            zero_device_bytes(page + in_page, n);
        }
        return true;
    });
    if (length == leaf_bytes)   // the whole leaf is now empty: drop its table too
        drop_leaf(li, leaf);
}

int RamBackend::trim(std::uint64_t offset, std::uint64_t length, bool /*fua*/) {
    return write_zeroes(offset, length, true, false);
}

bool RamBackend::provision_in_leaf(std::uint64_t li, std::uint64_t offset, std::uint64_t length) {
    // Shared, like write(): pages are only added here, never freed.
    std::shared_lock lock(stripe_of(li).mutex);
    Leaf* leaf = leaf_or_create(li);
    if (leaf == nullptr)
        return false;
    return for_each_page(offset, length, [&](std::uint64_t slot, std::uint64_t in_page, std::uint64_t n, std::uint64_t) {
        std::byte* page = page_or_create(*leaf, slot);   // a fresh page is already zero
        if (page == nullptr)
            return false;
        zero_device_bytes(page + in_page, n);
        leaf->unmark(slot);   // provisioned: a write in place of zeros in flight must not free it
        return true;
    });
}

int RamBackend::write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool /*fua*/) {
    if (!in_range(offset, length))
        return EINVAL;
    if (!may_trim) {
        // NBD_CMD_FLAG_NO_HOLE: the client wants the range provisioned (a
        // later write there must not fail for lack of memory), so allocate.
        const bool ok = for_each_leaf(offset, length, [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
            return provision_in_leaf(li, pos, chunk);
        });
        return ok ? 0 : ENOSPC;
    }
    // A hole is allowed: free what the range covers (the memory budget wants it).
    for_each_leaf(offset, length, [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        zero_in_leaf(li, pos, chunk);
        return true;
    });
    return 0;
}

int RamBackend::extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) {
    if (!in_range(offset, length))
        return EINVAL;
    for_each_leaf(offset, length, [&](std::uint64_t li, std::uint64_t pos, std::uint64_t chunk) {
        std::shared_lock lock(stripe_of(li).mutex);
        const Leaf* leaf = leaf_or_null(li);
        if (leaf == nullptr)   // a leaf never written: one hole
            return out.add(chunk, true);
        return for_each_page(pos, chunk, [&](std::uint64_t slot, std::uint64_t, std::uint64_t n, std::uint64_t) {
            return out.add(n, leaf->pages[slot].load(std::memory_order_acquire) == nullptr);
        });
    });
    return 0;
}

}   // namespace nbdsched::backend
