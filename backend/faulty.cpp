#include "backend/faulty.hpp"

#include <bit>
#include <cerrno>
#include <thread>

namespace nbdsched::backend {

namespace {

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

bool touches(const FaultRule& r, FaultOp op, std::uint64_t offset, std::uint64_t length) {
    if ((r.ops & op) == 0)
        return false;
    if (!r.has_range())
        return true;
    if (op == fault_flush || length == 0)
        return false;
    const std::uint64_t end = r.length > UINT64_MAX - r.offset ? UINT64_MAX : r.offset + r.length;
    return offset < end && r.offset < offset + length;
}

// The n-th draw of a rule, uniform in [0, 1) from the top 53 bits.
double draw(const FaultRule& r, std::uint64_t n) {
    return static_cast<double>(splitmix64(r.seed * 0x100000001b3ull + n) >> 11) * 0x1.0p-53;
}

}   // namespace

std::uint64_t FaultStats::total_errors() const {
    std::uint64_t n = 0;
    for (auto e : errors)
        n += e;
    return n;
}

std::uint64_t FaultStats::errors_of(FaultOp op) const {
    return errors[std::countr_zero(static_cast<unsigned>(op))];
}

FaultyBackend::Active::Active(std::vector<FaultRule> r)
    : rules(std::move(r)), matched(std::make_unique<std::atomic<std::uint64_t>[]>(rules.size())) {
}

FaultyBackend::FaultyBackend(std::unique_ptr<Backend> inner, std::vector<FaultRule> rules)
    : inner_(std::move(inner)), active_(std::make_shared<const Active>(std::move(rules))) {
}

void FaultyBackend::set_rules(std::vector<FaultRule> rules) {
    auto next = std::make_shared<const Active>(std::move(rules));
    std::lock_guard lock(mutex_);
    active_ = std::move(next);
}

std::shared_ptr<const FaultyBackend::Active> FaultyBackend::active() const {
    std::lock_guard lock(mutex_);
    return active_;
}

FaultStats FaultyBackend::stats() const {
    FaultStats s;
    for (unsigned i = 0; i < fault_op_count; ++i)
        s.errors[i] = errors_[i].load(std::memory_order_relaxed);
    s.enospc = enospc_.load(std::memory_order_relaxed);
    s.delayed = delayed_.load(std::memory_order_relaxed);
    return s;
}

std::size_t FaultyBackend::rule_count() const {
    return active()->rules.size();
}

void FaultyBackend::set_enabled(bool on) {
    enabled_.store(on, std::memory_order_relaxed);   // guards no other data
}

bool FaultyBackend::enabled() const {
    return enabled_.load(std::memory_order_relaxed);
}

bool FaultyBackend::blocking() const {
    for (const auto& r : active()->rules)
        if (r.delay.count() > 0)
            return true;
    return inner_->blocking();
}

std::string FaultyBackend::describe() const {
    return "faulty (" + std::to_string(rule_count()) + " rules) " + inner_->describe();
}

int FaultyBackend::inject(FaultOp op, std::uint64_t offset, std::uint64_t length) {
    if (!enabled())
        return 0;
    const auto a = active();
    Nanos delay{0};
    int error = 0;
    for (std::size_t i = 0; i < a->rules.size(); ++i) {
        const FaultRule& r = a->rules[i];
        if (!touches(r, op, offset, length))
            continue;
        const std::uint64_t n = a->matched[i].fetch_add(1, std::memory_order_relaxed);
        delay += r.delay;
        if (error == 0 && r.error != 0 && (r.rate >= 1.0 || draw(r, n) < r.rate))
            error = r.error;
    }
    if (delay.count() > 0) {
        delayed_.fetch_add(1, std::memory_order_relaxed);
        std::this_thread::sleep_for(delay);
    }
    if (error == 0)
        return 0;
    errors_[std::countr_zero(static_cast<unsigned>(op))].fetch_add(1, std::memory_order_relaxed);
    if (error == ENOSPC)
        enospc_.fetch_add(1, std::memory_order_relaxed);
    return error;
}

int FaultyBackend::read(std::uint64_t offset, std::span<std::byte> out) {
    if (int err = inject(fault_read, offset, out.size()))
        return err;
    return inner_->read(offset, out);
}

int FaultyBackend::write(std::uint64_t offset, std::span<const std::byte> data, bool fua) {
    if (int err = inject(fault_write, offset, data.size()))
        return err;
    return inner_->write(offset, data, fua);
}

int FaultyBackend::flush() {
    if (int err = inject(fault_flush, 0, 0))
        return err;
    return inner_->flush();
}

int FaultyBackend::trim(std::uint64_t offset, std::uint64_t length, bool fua) {
    if (int err = inject(fault_trim, offset, length))
        return err;
    return inner_->trim(offset, length, fua);
}

int FaultyBackend::write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) {
    if (int err = inject(fault_zeroes, offset, length))
        return err;
    return inner_->write_zeroes(offset, length, may_trim, fua);
}

int FaultyBackend::write_zeroes_fast(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) {
    if (int err = inject(fault_zeroes, offset, length))
        return err;
    return inner_->write_zeroes_fast(offset, length, may_trim, fua);
}

}   // namespace nbdsched::backend
