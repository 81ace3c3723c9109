#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>

#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"
#include "helpers.hpp"

using namespace nbdsched::backend;
using test::is_pattern;
using test::pattern;

namespace {
std::unique_ptr<FaultyBackend> faulty(FaultConfig c)
{
    return std::make_unique<FaultyBackend>(std::make_unique<RamBackend>(1 << 20), std::move(c));
}

int failures_of(FaultyBackend& b, int calls)
{
    std::vector<std::byte> buf(512);
    int n = 0;
    for (int i = 0; i < calls; ++i)
        n += b.read(static_cast<std::uint64_t>(i % 100) * 512, buf) != 0;
    return n;
}
} // namespace

TEST_CASE("faulty: no faults configured passes everything through")
{
    auto b = faulty({});
    REQUIRE(b->write(1000, pattern(1000, 5000), true) == 0);
    std::vector<std::byte> back(5000);
    REQUIRE(b->read(1000, back) == 0);
    CHECK(is_pattern(back, 1000));
    CHECK(b->flush() == 0);
    CHECK_FALSE(b->blocking());
    CHECK(b->size() == 1 << 20);
    CHECK(b->describe() == "faulty ram 1MiB");
    CHECK(b->stats().read_errors == 0);
}

TEST_CASE("faulty: error rate is close to the configured one and deterministic per seed")
{
    FaultConfig c;
    c.read_error_rate = 0.1;
    c.seed = 42;
    auto a = faulty(c);
    auto b = faulty(c);
    const int fa = failures_of(*a, 10000);
    CHECK(fa == failures_of(*b, 10000));   // same seed, same sequence
    CHECK(fa > 800);
    CHECK(fa < 1200);
    CHECK(a->stats().read_errors == static_cast<std::uint64_t>(fa));
    c.seed = 43;
    auto d = faulty(c);
    CHECK(failures_of(*d, 10000) != fa);
    // Writes are not affected by the read rate.
    CHECK(a->write(0, pattern(0, 4096), false) == 0);
}

TEST_CASE("faulty: bad ranges fail only the requests touching them")
{
    FaultConfig c;
    c.bad_ranges = {{8192, 4096}};
    c.bad_ranges_fail_writes = false;
    auto b = faulty(c);
    std::vector<std::byte> buf(4096);
    CHECK(b->read(4096, buf) == 0);
    CHECK(b->read(4097, buf) == EIO);
    CHECK(b->read(12288, buf) == 0);
    CHECK(b->write(8192, buf, false) == 0);
    c.bad_ranges_fail_writes = true;
    c.error = EROFS;
    b->set_config(c);
    CHECK(b->write(8192, buf, false) == EROFS);
    CHECK(b->trim(0, 1 << 20, false) == EROFS);
    CHECK(b->stats().write_errors == 2);
}

TEST_CASE("faulty: ENOSPC past an offset, flush errors, latency")
{
    FaultConfig c;
    c.enospc_from = 65536;
    c.flush_error_rate = 1.0;
    c.write_latency = std::chrono::milliseconds(5);
    auto b = faulty(c);
    CHECK(b->blocking());
    std::vector<std::byte> buf(4096);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(b->write(65536 - 4096, buf, false) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(5));
    CHECK(b->write(65536 - 4095, buf, false) == ENOSPC);
    CHECK(b->write_zeroes(65536, 10, false, false) == ENOSPC);
    CHECK(b->trim(65536, 4096, false) == 0);   // trim never runs out of space
    CHECK(b->flush() == EIO);
    CHECK(b->stats().enospc_errors == 2);
    CHECK(b->stats().flush_errors == 1);
}
