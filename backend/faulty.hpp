// Fault injection around any Backend (config key `faults:`, reliability
// tests): FaultRules make matching requests fail with an errno, at a
// deterministic pseudo-random rate and/or inside an offset range, and add
// latency (sleeps in the calling thread, so a wrapper with a delay reports
// blocking() = true and the daemon runs it on its thread pool).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"
#include "common/fault_rule.hpp"

namespace nbdsched::backend {

// What the rules did so far, per operation (index: bit position of FaultOp).
struct FaultStats {
    std::uint64_t errors[fault_op_count] = {};
    std::uint64_t enospc = 0;    // of those errors, ENOSPC
    std::uint64_t delayed = 0;   // requests a rule delayed

    std::uint64_t total_errors() const;
    std::uint64_t errors_of(FaultOp op) const;
};

class FaultyBackend final : public Backend {
public:
    // The first rule that matches a request and fires decides its error;
    // the delays of all matching rules add up.
    FaultyBackend(std::unique_ptr<Backend> inner, std::vector<FaultRule> rules);

    // Replace the rules at run time (e.g. fail only after a test has written
    // its data). Rate draws restart with the new rules.
    void set_rules(std::vector<FaultRule> rules);
    FaultStats stats() const;
    std::size_t rule_count() const;

    // Switch injection off (every request passes straight through: no error,
    // no delay, no rate draw) or back on, keeping the rules and the counters
    // (`nbdsched ctl faults`). Safe from any thread; a request already past
    // the check finishes as it started. blocking() does not change with it,
    // so the device keeps running I/O where it started running it.
    void set_enabled(bool on);
    bool enabled() const;
    Backend& inner() { return *inner_; }
    const Backend& inner() const { return *inner_; }

    std::uint64_t size() const override { return inner_->size(); }
    bool blocking() const override;
    std::optional<bool> detected_rotational() const override { return inner_->detected_rotational(); }
    std::string describe() const override;
    std::optional<std::uint64_t> memory_bytes() const override { return inner_->memory_bytes(); }
    int storage_error() const override { return inner_->storage_error(); }

    int read(std::uint64_t offset, std::span<std::byte> out) override;
    int write(std::uint64_t offset, std::span<const std::byte> data, bool fua) override;
    int flush() override;
    int trim(std::uint64_t offset, std::uint64_t length, bool fua) override;
    int write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;
    int write_zeroes_fast(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;
    // Metadata and hints pass through: rules match data operations only.
    int extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) override {
        return inner_->extents(offset, length, out);
    }
    int cache(std::uint64_t offset, std::uint64_t length) override { return inner_->cache(offset, length); }
    int refresh_size() override { return inner_->refresh_size(); }
    std::string release_exclusive() override { return inner_->release_exclusive(); }
    std::string acquire_exclusive(std::string& broke) override { return inner_->acquire_exclusive(broke); }
    std::string undo_open() override { return inner_->undo_open(); }

private:
    // The rules with a counter of the requests each matched; replaced as a
    // whole so a request in flight keeps the set it started with.
    struct Active {
        explicit Active(std::vector<FaultRule> r);
        std::vector<FaultRule> rules;
        std::unique_ptr<std::atomic<std::uint64_t>[]> matched;
    };

    // 0 or the errno to inject for this request (after sleeping the delays).
    int inject(FaultOp op, std::uint64_t offset, std::uint64_t length);
    std::shared_ptr<const Active> active() const;

    std::unique_ptr<Backend> inner_;
    mutable std::mutex mutex_;
    std::shared_ptr<const Active> active_;
    std::atomic<bool> enabled_{true};
    std::atomic<std::uint64_t> errors_[fault_op_count] = {};
    std::atomic<std::uint64_t> enospc_{0};
    std::atomic<std::uint64_t> delayed_{0};
};

}   // namespace nbdsched::backend
