// RAM backend under concurrency; also built in the `tsan` suite.
#include <doctest/doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "backend/ram_backend.hpp"
#include "readahead/readahead.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

TEST_CASE("ram: concurrent writers allocating interleaved pages of shared leaves") {
    constexpr int threads = 4;
    constexpr std::uint64_t size = 40 << 20;   // 3 leaves, the last partial
    constexpr std::uint64_t pages = size / 4096;
    RamBackend ram(size);
    std::vector<std::thread> pool;
    std::atomic<int> failures{0};
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            for (std::uint64_t p = t; p < pages; p += threads)
                if (ram.write(p * 4096, byte_pattern(p * 4096, 4096), false) != 0)
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

TEST_CASE("ram: readers never see freed memory while trims free pages") {
    constexpr std::uint64_t size = 16 << 20;
    constexpr std::uint64_t pages = size / 4096;
    RamBackend ram(size);
    REQUIRE(ram.write(0, byte_pattern(0, size), false) == 0);
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
            (void)other.write(static_cast<std::uint64_t>(i) * 4096, byte_pattern(0, 4096), false);
    });
    trimmer.join();
    reader.join();
    writer.join();
    CHECK(bad == 0);
    CHECK(ram.allocated_bytes() == size / 2);
}

TEST_CASE("read-ahead: concurrent readers and writers on one device") {
    using namespace nbdsched::readahead;
    constexpr std::uint64_t size = 16 << 20;
    RamBackend disk(size);
    REQUIRE(disk.write(0, byte_pattern(0, size), false) == 0);
    Options o;
    o.device_size = size;
    o.window_bytes = 256 << 10;
    o.cache_bytes = 2 << 20;
    ReadAhead ra(o);
    std::atomic<int> bad{0};
    std::vector<std::thread> pool;
    for (std::uint64_t q = 0; q < 3; ++q)
        pool.emplace_back([&, q] {
            std::vector<std::byte> buf(32 << 10);
            for (std::uint64_t off = q * (4 << 20); off < (q + 1) * (4 << 20); off += buf.size()) {
                auto d = ra.on_read(q, off, buf);
                for (const auto& p : d.prefetch) {
                    std::vector<std::byte> data(p.length);
                    (void)disk.read(p.offset, data);
                    ra.on_prefetch_done(p.ticket, 0, std::move(data));
                }
                if (d.kind != ReadDecision::Kind::hit && !(d.kind == ReadDecision::Kind::wait && ra.lookup(off, buf)))
                    (void)disk.read(off, buf);
                if (!is_pattern(buf, off))   // nobody writes these regions
                    ++bad;
            }
        });
    pool.emplace_back([&] {   // writes (same data) elsewhere, invalidating in parallel
        for (std::uint64_t off = 12 << 20; off < size; off += 64 << 10) {
            ra.on_write(off, 64 << 10);
            (void)disk.write(off, byte_pattern(off, 64 << 10), false);
            ra.on_write_done(off, 64 << 10);
            (void)ra.stats();
        }
    });
    for (auto& th : pool)
        th.join();
    CHECK(bad == 0);
    CHECK(ra.stats().hits > 0);
}
