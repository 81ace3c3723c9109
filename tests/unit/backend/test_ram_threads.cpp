// RAM backend under concurrency; also built in the `tsan` suite.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backend/ram_backend.hpp"
#include "helpers.hpp"

using namespace nbdsched::backend;
using test::all_zero;
using test::is_pattern;
using test::pattern;

TEST_CASE("ram: concurrent writers allocating interleaved pages of shared leaves")
{
    constexpr int threads = 4;
    constexpr std::uint64_t size = 40 << 20;   // 3 leaves, the last partial
    constexpr std::uint64_t pages = size / 4096;
    RamBackend ram(size);
    std::vector<std::thread> pool;
    std::atomic<int> failures{0};
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::uint64_t p = t; p < pages; p += threads)
                if (ram.write(p * 4096, pattern(p * 4096, 4096), false) != 0)
                    ++failures;
        });
    for (auto& th : pool)
        th.join();
    CHECK(failures == 0);
    CHECK(ram.allocated_bytes() == size);
    std::vector<std::byte> all(size);
    REQUIRE(ram.read(0, all) == 0);
    CHECK(is_pattern(all, 0));
}

TEST_CASE("ram: readers never see freed memory while trims free pages")
{
    constexpr std::uint64_t size = 16 << 20;
    constexpr std::uint64_t pages = size / 4096;
    RamBackend ram(size);
    REQUIRE(ram.write(0, pattern(0, size), false) == 0);
    std::atomic<bool> done{false};
    std::atomic<int> bad{0};
    std::thread trimmer([&] {
        for (std::uint64_t p = 0; p < pages; p += 2)   // even pages: freed one by one
            (void)ram.trim(p * 4096, 4096, false);
        done = true;
    });
    std::thread reader([&] {
        std::vector<std::byte> page(4096);
        for (std::uint64_t round = 0; !done || round == 0; ++round)
            for (std::uint64_t p = 0; p < pages; p += 97) {
                (void)ram.read(p * 4096, page);
                const bool ok = p % 2 == 1 ? is_pattern(page, p * 4096) : (is_pattern(page, p * 4096) || all_zero(page));
                if (!ok)
                    ++bad;
            }
    });
    std::thread writer([&] {   // allocates in a different leaf meanwhile
        RamBackend other(1 << 20);
        for (int i = 0; i < 256; ++i)
            (void)other.write(static_cast<std::uint64_t>(i) * 4096, pattern(0, 4096), false);
    });
    trimmer.join();
    reader.join();
    writer.join();
    CHECK(bad == 0);
    CHECK(ram.allocated_bytes() == size / 2);
}
