// The buffer pool's memory accounting: what requests hold at most between
// two checks, and giving back kept blocks down to that (the idle release,
// daemon/process/idle_memory.cpp). Each test case runs on a thread of its
// own so that it starts with an empty pool.
#include <cstdlib>
#include <doctest/doctest.h>
#include <thread>
#include <vector>

#include "daemon/device/buffer_pool.hpp"
#include "daemon/device/io_request.hpp"

using namespace nbdsched::daemon;

namespace {

template <typename F>
void on_fresh_thread(F f) {
    std::thread t(f);
    t.join();
}

constexpr std::size_t mib = 1u << 20;

}   // namespace

TEST_CASE("the peak counts what is taken at once, then starts again from what is held") {
    on_fresh_thread([] {
        std::size_t cap = 0;
        std::vector<std::byte*> blocks;
        for (int i = 0; i < 8; ++i) blocks.push_back(buffer_pool::take(mib, cap));
        CHECK(cap == mib);
        for (auto* b : blocks) buffer_pool::give(b, cap);
        CHECK(buffer_pool::peak_in_use_here() == 8 * mib);
        // Nothing held now: the next period starts at 0.
        CHECK(buffer_pool::peak_in_use_here() == 0);
        auto* held = buffer_pool::take(5000, cap);   // rounded up to 8 KiB
        CHECK(cap == 8192);
        CHECK(buffer_pool::peak_in_use_here() == 8192);
        CHECK(buffer_pool::peak_in_use_here() == 8192);   // still held
        buffer_pool::give(held, cap);
        // Blocks above the pooled sizes count too.
        auto* big = buffer_pool::take(3 * mib, cap);
        buffer_pool::give(big, cap);
        CHECK(buffer_pool::peak_in_use_here() == 3 * mib);
        buffer_pool::release_kept_here(0);
    });
}

TEST_CASE("release keeps at most the given bytes, the largest blocks going first") {
    on_fresh_thread([] {
        std::size_t cap_big = 0, cap_small = 0;
        std::vector<std::byte*> big, small;
        for (int i = 0; i < 4; ++i) big.push_back(buffer_pool::take(mib, cap_big));
        for (int i = 0; i < 4; ++i) small.push_back(buffer_pool::take(4096, cap_small));
        for (auto* b : big) buffer_pool::give(b, cap_big);
        for (auto* b : small) buffer_pool::give(b, cap_small);
        // Kept: 4 MiB + 16 KiB. Down to 1 MiB + 16 KiB frees three 1 MiB blocks.
        CHECK(buffer_pool::release_kept_here(mib + 4 * 4096) == 3 * mib);
        CHECK(buffer_pool::release_kept_here(mib + 4 * 4096) == 0);
        // Taking a kept block and giving it back keeps the count right.
        std::size_t cap = 0;
        auto* again = buffer_pool::take(mib, cap);
        buffer_pool::give(again, cap);
        CHECK(buffer_pool::release_kept_here(0) == mib + 4 * 4096);
        CHECK(buffer_pool::release_kept_here(0) == 0);
    });
}

TEST_CASE("a buffer given away (to the read-ahead cache) stops counting as held") {
    on_fresh_thread([] {
        AlignedBuffer buffer;
        buffer.reserve(mib);
        std::byte* given_away = buffer.take();
        CHECK(buffer.capacity() == 0);
        CHECK(buffer_pool::peak_in_use_here() == mib);   // it was held
        CHECK(buffer_pool::peak_in_use_here() == 0);     // and is no longer
        std::free(given_away);
    });
}

TEST_CASE("a block given away comes back with give_disowned: taken again, not counted as freed twice") {
    on_fresh_thread([] {
        AlignedBuffer buffer;
        buffer.reserve(mib);
        std::byte* given_away = buffer.take();
        CHECK(buffer_pool::peak_in_use_here() == mib);
        buffer_pool::give_disowned(given_away, mib);   // the read-ahead cache dropped it
        CHECK(buffer_pool::peak_in_use_here() == 0);
        std::size_t cap = 0;
        std::byte* again = buffer_pool::take(mib, cap);
        CHECK(again == given_away);                      // reused, not allocated
        CHECK(buffer_pool::peak_in_use_here() == mib);   // held once, from 0
        buffer_pool::give(again, cap);
        CHECK(buffer_pool::release_kept_here(0) == mib);
    });
}
