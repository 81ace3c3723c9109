// The RAM backend's own cost next to a plain memcpy: a number to watch
// (printed) with a generous bound. It measures speed, so it runs alone and
// only in the optimised build (suite `speed`).
#include <doctest/doctest.h>

#include <chrono>
#include <cstdio>
#include <cstring>

#include "backend/ram_backend.hpp"
#include "common/units.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {

struct Cost {
    double write_ns;
    double read_ns;
};

// Random 4 KiB writes then reads over `pages` pages through `write`/`read`.
template <class W, class R>
Cost measure(std::uint64_t pages, W&& write, R&& read) {
    const int ops = 100000;
    std::uint64_t x = 12345;
    auto next = [&] {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return (x >> 20) % pages * 4096;
    };
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i)
        write(next());
    auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < ops; ++i)
        read(next());
    auto t2 = std::chrono::steady_clock::now();
    return {std::chrono::duration<double, std::nano>(t1 - t0).count() / ops,
            std::chrono::duration<double, std::nano>(t2 - t1).count() / ops};
}

}   // namespace

TEST_CASE("ram: 4k read/write cost next to a plain memcpy (printed)") {
    // A cache-resident set shows the backend's own overhead; a large one
    // what a client really sees (memory-bound). Best of 2 runs: CI is noisy.
    for (const std::uint64_t size : {std::uint64_t{2} << 20, std::uint64_t{128} << 20}) {
        const std::uint64_t pages = size / 4096;
        RamBackend ram(size);
        std::vector<std::byte> buf = byte_pattern(0, 4096);
        for (std::uint64_t p = 0; p < pages; ++p)   // pre-allocate: measure steady state
            REQUIRE(ram.write(p * 4096, buf, false) == 0);
        std::vector<std::byte> flat(size, std::byte{1});
        Cost base{1e18, 1e18}, c{1e18, 1e18};
        for (int run = 0; run < 2; ++run) {
            const Cost b = measure(
                pages, [&](std::uint64_t o) { std::memcpy(flat.data() + o, buf.data(), 4096); },
                [&](std::uint64_t o) {
                    std::memcpy(buf.data(), flat.data() + o, 4096);
                    asm volatile(""
                                 :
                                 : "r"(buf.data())
                                 : "memory");
                });
            const Cost r = measure(
                pages, [&](std::uint64_t o) { (void)ram.write(o, buf, false); },
                [&](std::uint64_t o) { (void)ram.read(o, buf); });
            base = {std::min(base.write_ns, b.write_ns), std::min(base.read_ns, b.read_ns)};
            c = {std::min(c.write_ns, r.write_ns), std::min(c.read_ns, r.read_ns)};
        }
        std::printf("ram 4k random over %s: write %.0f ns/op, read %.0f ns/op "
                    "(plain memcpy on a flat buffer: %.0f / %.0f ns)\n",
                    nbdsched::format_size(size).c_str(), c.write_ns, c.read_ns, base.write_ns, base.read_ns);
        CHECK(c.write_ns < 20000);   // generous: a memcpy plus a lock, even on a loaded CI box
        CHECK(c.read_ns < 20000);
    }
}
