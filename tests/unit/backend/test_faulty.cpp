#include <doctest/doctest.h>

#include <cerrno>
#include <chrono>
#include <limits>

#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"
#include "pattern.hpp"

using namespace nbdsched::backend;
using namespace nbdsched::testlib;

namespace {
std::unique_ptr<FaultyBackend> faulty(std::vector<nbdsched::FaultRule> rules) {
    return std::make_unique<FaultyBackend>(std::make_unique<RamBackend>(1 << 20), std::move(rules));
}

nbdsched::FaultRule rule(unsigned ops, int error) {
    nbdsched::FaultRule r;
    r.ops = ops;
    r.error = error;
    return r;
}

nbdsched::FaultRule ranged(unsigned ops, int error, std::uint64_t offset, std::uint64_t length) {
    auto r = rule(ops, error);
    r.offset = offset;
    r.length = length;
    return r;
}

int failures_of(FaultyBackend& b, int calls) {
    std::vector<std::byte> buf(512);
    int n = 0;
    for (int i = 0; i < calls; ++i)
        n += b.read(static_cast<std::uint64_t>(i % 100) * 512, buf) != 0;
    return n;
}
}   // namespace

TEST_CASE("faulty: no faults configured passes everything through") {
    auto b = faulty({});
    REQUIRE(b->write(1000, byte_pattern(1000, 5000), true) == 0);
    std::vector<std::byte> back(5000);
    REQUIRE(b->read(1000, back) == 0);
    CHECK(is_pattern(back, 1000));
    CHECK(b->flush() == 0);
    CHECK_FALSE(b->blocking());
    CHECK(b->size() == 1 << 20);
    CHECK(b->describe() == "faulty (0 rules) ram 1MiB");
    CHECK(b->stats().total_errors() == 0);
}

TEST_CASE("faulty: error rate is close to the configured one and deterministic per seed") {
    auto r = rule(nbdsched::fault_read, EIO);
    r.rate = 0.1;
    r.seed = 42;
    auto a = faulty({r});
    auto b = faulty({r});
    const int fa = failures_of(*a, 10000);
    CHECK(fa == failures_of(*b, 10000));   // same seed, same sequence
    CHECK(fa > 800);
    CHECK(fa < 1200);
    CHECK(a->stats().errors_of(nbdsched::fault_read) == static_cast<std::uint64_t>(fa));
    r.seed = 43;
    auto d = faulty({r});
    CHECK(failures_of(*d, 10000) != fa);
    // Writes are not affected by a read rule.
    CHECK(a->write(0, byte_pattern(0, 4096), false) == 0);
}

TEST_CASE("faulty: ranged rules fail only the requests touching them, per operation") {
    auto b = faulty({ranged(nbdsched::fault_read, EIO, 8192, 4096)});
    std::vector<std::byte> buf(4096);
    CHECK(b->read(4096, buf) == 0);
    CHECK(b->read(4097, buf) == EIO);
    CHECK(b->read(12288, buf) == 0);
    CHECK(b->write(8192, buf, false) == 0);
    CHECK(b->flush() == 0);   // a flush touches no range
    b->set_rules({ranged(nbdsched::fault_any, EROFS, 8192, 4096)});
    CHECK(b->write(8192, buf, false) == EROFS);
    CHECK(b->trim(0, 1 << 20, false) == EROFS);
    CHECK(b->flush() == 0);
    CHECK(b->stats().errors_of(nbdsched::fault_write) == 1);
    CHECK(b->stats().errors_of(nbdsched::fault_trim) == 1);
}

TEST_CASE("faulty: ENOSPC past an offset, flush errors, delays; the first firing rule decides") {
    // An offset without a length reaches the end of the device.
    auto enospc = ranged(nbdsched::fault_write | nbdsched::fault_zeroes, ENOSPC, 65536,
                         std::numeric_limits<std::uint64_t>::max());
    auto slow = rule(nbdsched::fault_write, 0);
    slow.delay = std::chrono::milliseconds(5);
    auto b = faulty({enospc, rule(nbdsched::fault_flush, EIO), slow, rule(nbdsched::fault_write, EIO)});
    CHECK(b->blocking());
    std::vector<std::byte> buf(4096);
    auto t0 = std::chrono::steady_clock::now();
    CHECK(b->write(65536 - 4096, buf, false) == EIO);
    CHECK(std::chrono::steady_clock::now() - t0 >= std::chrono::milliseconds(5));
    CHECK(b->write(65536 - 4095, buf, false) == ENOSPC);
    CHECK(b->write_zeroes(65536, 10, false, false) == ENOSPC);
    CHECK(b->trim(65536, 4096, false) == 0);   // trim is not in the ENOSPC rule
    CHECK(b->flush() == EIO);
    const auto s = b->stats();
    CHECK(s.enospc == 2);
    CHECK(s.errors_of(nbdsched::fault_flush) == 1);
    CHECK(s.errors_of(nbdsched::fault_write) == 2);
    CHECK(s.delayed == 2);
    CHECK(s.total_errors() == 4);
}

TEST_CASE("faulty: switched off, nothing is injected; on again, the same rules fire; counts stay") {
    auto slow = rule(nbdsched::fault_write, 0);
    slow.delay = std::chrono::milliseconds(1);
    auto b = faulty({ranged(nbdsched::fault_write, EIO, 8192, 4096), slow});
    std::vector<std::byte> buf(4096);
    CHECK(b->enabled());
    CHECK(b->write(8192, buf, false) == EIO);
    b->set_enabled(false);
    CHECK_FALSE(b->enabled());
    CHECK(b->rule_count() == 2);
    CHECK(b->blocking());   // the device keeps running I/O where it started
    REQUIRE(b->write(8192, byte_pattern(8192, 4096), false) == 0);
    REQUIRE(b->read(8192, buf) == 0);
    CHECK(is_pattern(buf, 8192));
    CHECK(b->stats().errors_of(nbdsched::fault_write) == 1);
    CHECK(b->stats().delayed == 1);   // the write while off was not delayed
    b->set_enabled(true);
    CHECK(b->write(8192, buf, false) == EIO);
    const auto s = b->stats();
    CHECK(s.errors_of(nbdsched::fault_write) == 2);
    CHECK(s.delayed == 2);
}
