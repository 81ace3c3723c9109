#include "model_client.hpp"

#include <algorithm>
#include <cstring>
#include <random>
#include <stdexcept>

#include "nbd_handle.hpp"
#include "pattern.hpp"

namespace nbdsched::reliability {

namespace {

constexpr std::uint64_t block = 4096;
constexpr std::uint32_t zero = 0;        // the block reads as zeroes
constexpr std::uint32_t trimmed = ~0u;   // zeroes or what it held before

}   // namespace

// One client's state: its connection and what each block must hold.
struct ModelRun {
    testlib::Nbd h;
    std::mt19937_64 rng;
    std::vector<std::uint32_t> seed;   // per block: pattern seed, zero or trimmed
    std::vector<std::uint32_t> before_trim;
    std::uint32_t next_seed = 1;
    ModelStats& stats;
};

ModelClient::ModelClient(std::string uri, std::uint64_t offset, std::uint64_t size, std::uint64_t seed)
    : uri_(std::move(uri)), offset_(offset), size_(size), seed_(seed), thread_([this] { run(); }) {}

ModelClient::~ModelClient() { stop(); }

void ModelClient::stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
}

ModelStats ModelClient::stats() const { return stats_; }

void ModelClient::run() {
    try {
        const std::size_t blocks = size_ / block;
        ModelRun m{testlib::connect(uri_), std::mt19937_64(seed_), std::vector<std::uint32_t>(blocks, trimmed),
                   std::vector<std::uint32_t>(blocks, zero), 1, stats_};
        // Start from a known state: the region zeroed.
        if (nbd_zero(m.h, size_, offset_, 0) != 0) throw std::runtime_error("zero: " + testlib::nbd_error());
        std::fill(m.seed.begin(), m.seed.end(), zero);
        while (!stop_) op(m);
    } catch (const std::exception& e) {
        stats_.error = e.what();
    }
}

void ModelClient::op(ModelRun& m) {
    const std::size_t blocks = m.seed.size();
    const std::uint64_t count = 1 + m.rng() % 16;
    const std::uint64_t first = m.rng() % (blocks - count + 1);
    const std::uint64_t off = offset_ + first * block, len = count * block;
    const unsigned kind = m.rng() % 20;
    const auto t0 = std::chrono::steady_clock::now();
    int rc = 0;
    std::string what;
    if (kind < 8) {   // write, every fourth with FUA
        std::vector<std::uint8_t> buf;
        for (std::uint64_t b = 0; b < count; ++b) {
            m.seed[first + b] = m.next_seed++;
            auto p = testlib::pattern(off + b * block, block, m.seed[first + b]);
            buf.insert(buf.end(), p.begin(), p.end());
        }
        rc = nbd_pwrite(m.h, buf.data(), len, off, kind % 4 == 0 ? LIBNBD_CMD_FLAG_FUA : 0);
        what = "write";
    } else if (kind < 14) {   // read and verify
        std::vector<std::uint8_t> buf(len);
        rc = nbd_pread(m.h, buf.data(), len, off, 0);
        what = "read";
        for (std::uint64_t b = 0; rc == 0 && b < count; ++b) {
            const std::uint8_t* got = buf.data() + b * block;
            auto matches = [&](std::uint32_t s) {
                if (s == zero) return std::all_of(got, got + block, [](std::uint8_t x) { return x == 0; });
                auto want = testlib::pattern(off + b * block, block, s);
                return std::memcmp(got, want.data(), block) == 0;
            };
            std::uint32_t s = m.seed[first + b];
            // A trimmed block settles on what it reads (zeroes or its old data).
            if (s == trimmed) s = m.seed[first + b] = matches(zero) ? zero : m.before_trim[first + b];
            if (!matches(s))
                throw std::runtime_error("block at offset " + std::to_string(off + b * block) +
                                         " does not hold what was written (seed " + std::to_string(s) + ")");
        }
        ++m.stats.reads_verified;
    } else if (kind < 16) {   // trim: zeroes or the old data, never anything else
        for (std::uint64_t b = 0; b < count; ++b) {
            if (m.seed[first + b] != trimmed) m.before_trim[first + b] = m.seed[first + b];
            m.seed[first + b] = trimmed;
        }
        rc = nbd_trim(m.h, len, off, 0);
        what = "trim";
        ++m.stats.trims;
    } else if (kind < 19) {   // write zeroes, half of them NO_HOLE
        for (std::uint64_t b = 0; b < count; ++b) m.seed[first + b] = zero;
        rc = nbd_zero(m.h, len, off, kind % 2 ? LIBNBD_CMD_FLAG_NO_HOLE : 0);
        what = "write_zeroes";
        ++m.stats.zeroes;
    } else {
        rc = nbd_flush(m.h, 0);
        what = "flush";
        ++m.stats.flushes;
    }
    if (rc != 0) throw std::runtime_error(what + " failed: " + testlib::nbd_error());
    ++m.stats.requests;
    m.stats.max_latency = std::max(m.stats.max_latency,
                                   std::chrono::duration_cast<std::chrono::nanoseconds>(
                                       std::chrono::steady_clock::now() - t0));
}

}   // namespace nbdsched::reliability
