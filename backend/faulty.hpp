// Fault injection around any Backend, for reliability tests: errors at a
// deterministic pseudo-random rate or inside offset ranges, ENOSPC past a
// byte offset, and added latency (sleeps in the calling thread, so a
// wrapper with latency reports blocking() = true).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"

namespace nbdsched::backend {

struct FaultConfig {
    struct Range {
        std::uint64_t offset = 0;
        std::uint64_t length = 0;
    };
    // Probability (0..1) that a call fails with `error`. The draw is the
    // n-th value of a splitmix64 sequence seeded with `seed`, n counting the
    // calls of that kind: the same call sequence fails the same way.
    double read_error_rate = 0;
    double write_error_rate = 0;   // write, trim and write_zeroes
    double flush_error_rate = 0;
    std::uint64_t seed = 1;
    int error = 5;                 // EIO
    // Reads/writes touching any of these ranges fail with `error`.
    std::vector<Range> bad_ranges;
    bool bad_ranges_fail_reads = true;
    bool bad_ranges_fail_writes = true;
    // Writes (and write_zeroes) ending past this offset fail with ENOSPC.
    std::uint64_t enospc_from = UINT64_MAX;
    // Added before each call of that kind.
    std::chrono::nanoseconds read_latency{0};
    std::chrono::nanoseconds write_latency{0};
    std::chrono::nanoseconds flush_latency{0};
};

struct FaultStats {
    std::uint64_t read_errors = 0;
    std::uint64_t write_errors = 0;
    std::uint64_t flush_errors = 0;
    std::uint64_t enospc_errors = 0;
};

class FaultyBackend final : public Backend {
public:
    FaultyBackend(std::unique_ptr<Backend> inner, FaultConfig config);

    // Replace the fault configuration at run time (e.g. fail only after a
    // test has written its data). The call counters keep running.
    void set_config(FaultConfig config);
    FaultStats stats() const;
    Backend& inner() { return *inner_; }
    const Backend& inner() const { return *inner_; }

    std::uint64_t size() const override { return inner_->size(); }
    bool blocking() const override;
    std::optional<bool> detected_rotational() const override { return inner_->detected_rotational(); }
    std::string describe() const override { return "faulty " + inner_->describe(); }

    int read(std::uint64_t offset, std::span<std::byte> out) override;
    int write(std::uint64_t offset, std::span<const std::byte> data, bool fua) override;
    int flush() override;
    int trim(std::uint64_t offset, std::uint64_t length, bool fua) override;
    int write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;

private:
    enum Kind { read_kind, write_kind, flush_kind, kind_count };
    // 0 or the errno to inject for this call (also sleeps the latency).
    int inject(Kind kind, std::uint64_t offset, std::uint64_t length, bool may_enospc = true);
    FaultConfig snapshot() const;

    std::unique_ptr<Backend> inner_;
    mutable std::mutex mutex_;
    FaultConfig config_;
    std::atomic<std::uint64_t> calls_[kind_count] = {};
    std::atomic<std::uint64_t> errors_[kind_count] = {};
    std::atomic<std::uint64_t> enospc_{0};
};

} // namespace nbdsched::backend
