// Pins on a RAM device's pages, and the pages freed while a pin may still
// reach them. A pinned READ reply is sent from the device's pages and a
// pinned WRITE payload is received into them, so a page a TRIM frees
// meanwhile is retired, not given back. Pins are counted by the epoch they
// began in, and a page retired in epoch E goes back to the arena as soon as
// every pin of epochs up to E has ended: pins that begin later cannot find
// it. With one count for all pins instead, a device that always has some
// pin out (a client streaming large reads) would never free a trimmed page,
// and a tenant writing and trimming the same blocks would grow without end.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "backend/page_arena.hpp"

namespace nbdsched::backend {

class PagePins {
public:
    using Pin = std::uint64_t;

    explicit PagePins(PageArena& arena) : arena_(arena) {}
    PagePins(const PagePins&) = delete;
    PagePins& operator=(const PagePins&) = delete;

    // Begins a pin; the caller looks pages up after it, so that a page freed
    // after that look (and so after this call) sees it.
    Pin pin();
    // Ends a pin; the pages no pin can reach any more go back to the arena.
    void unpin(Pin pin);
    // A page taken out of its table: back to the arena now, or retired
    // until the pins that may reach it have ended.
    void free_page(std::byte* page);
    // Pages retired and not yet given back.
    std::size_t retired() const;

private:
    struct EpochPins {
        std::uint64_t epoch;
        std::size_t count;
    };
    struct Retired {
        std::uint64_t epoch;   // pins of this epoch and older may reach it
        std::byte* page;
    };

    PageArena& arena_;
    mutable std::mutex mutex_;
    std::uint64_t epoch_ = 0;
    std::vector<EpochPins> live_;   // epochs with pins out, oldest first (reused: no allocation per pin)
    std::deque<Retired> retired_;   // oldest first
};

}   // namespace nbdsched::backend
