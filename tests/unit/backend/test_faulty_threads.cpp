// Fault injection switched on and off while other threads do I/O (the file
// backend's thread pool calls a FaultyBackend concurrently with `ctl
// faults` on the event loop); also built in the `tsan` suite.
#include <doctest/doctest.h>

#include <atomic>
#include <cerrno>
#include <thread>
#include <vector>

#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"

using namespace nbdsched::backend;

TEST_CASE("faulty: switching on and off under concurrent requests only ever yields success or the rule's error") {
    nbdsched::FaultRule r;
    r.ops = nbdsched::fault_write;
    r.error = EIO;
    FaultyBackend b(std::make_unique<RamBackend>(1 << 20), {r});
    constexpr int threads = 3;
    constexpr int writes = 4000;
    std::atomic<int> failed{0}, odd{0};
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
            std::vector<std::byte> buf(512);
            for (int i = 0; i < writes; ++i) {
                const int err = b.write(static_cast<std::uint64_t>(t) * 4096, buf, false);
                if (err == EIO)
                    ++failed;
                else if (err != 0)
                    ++odd;
            }
        });
    for (int i = 0; i < 2000; ++i) {
        b.set_enabled(i % 2 == 1);
        (void)b.stats();
        (void)b.enabled();
    }
    b.set_enabled(true);
    for (auto& th : pool)
        th.join();
    CHECK(odd == 0);
    CHECK(b.stats().errors_of(nbdsched::fault_write) == static_cast<std::uint64_t>(failed.load()));
    std::vector<std::byte> buf(512);
    CHECK(b.write(0, buf, false) == EIO);
}
