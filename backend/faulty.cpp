#include "backend/faulty.hpp"

#include <cerrno>
#include <thread>

namespace nbdsched::backend {

namespace {

std::uint64_t splitmix64(std::uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

bool overlaps(const FaultConfig::Range& r, std::uint64_t offset, std::uint64_t length)
{
    return offset < r.offset + r.length && r.offset < offset + length;
}

} // namespace

FaultyBackend::FaultyBackend(std::unique_ptr<Backend> inner, FaultConfig config)
    : inner_(std::move(inner)), config_(std::move(config))
{
}

void FaultyBackend::set_config(FaultConfig config)
{
    std::lock_guard lock(mutex_);
    config_ = std::move(config);
}

FaultConfig FaultyBackend::snapshot() const
{
    std::lock_guard lock(mutex_);
    return config_;
}

FaultStats FaultyBackend::stats() const
{
    return {errors_[read_kind].load(), errors_[write_kind].load(), errors_[flush_kind].load(), enospc_.load()};
}

bool FaultyBackend::blocking() const
{
    const FaultConfig c = snapshot();
    const bool sleeps = c.read_latency.count() > 0 || c.write_latency.count() > 0 || c.flush_latency.count() > 0;
    return sleeps || inner_->blocking();
}

int FaultyBackend::inject(Kind kind, std::uint64_t offset, std::uint64_t length, bool may_enospc)
{
    const FaultConfig c = snapshot();
    const std::uint64_t n = calls_[kind].fetch_add(1, std::memory_order_relaxed);
    const std::chrono::nanoseconds latency[] = {c.read_latency, c.write_latency, c.flush_latency};
    if (latency[kind].count() > 0)
        std::this_thread::sleep_for(latency[kind]);

    if (may_enospc && kind == write_kind && length > 0 && offset + length > c.enospc_from) {
        enospc_.fetch_add(1, std::memory_order_relaxed);
        return ENOSPC;
    }
    const bool range_applies = kind == read_kind ? c.bad_ranges_fail_reads
        : kind == write_kind ? c.bad_ranges_fail_writes : false;
    bool fail = false;
    if (range_applies)
        for (const auto& r : c.bad_ranges)
            fail = fail || overlaps(r, offset, length);
    const double rate[] = {c.read_error_rate, c.write_error_rate, c.flush_error_rate};
    if (!fail && rate[kind] > 0) {
        // Top 53 bits as a uniform double in [0, 1).
        const double draw = static_cast<double>(splitmix64(c.seed * 0x100000001b3ull + n * kind_count + kind) >> 11)
            * 0x1.0p-53;
        fail = draw < rate[kind];
    }
    if (!fail)
        return 0;
    errors_[kind].fetch_add(1, std::memory_order_relaxed);
    return c.error;
}

int FaultyBackend::read(std::uint64_t offset, std::span<std::byte> out)
{
    if (int err = inject(read_kind, offset, out.size()))
        return err;
    return inner_->read(offset, out);
}

int FaultyBackend::write(std::uint64_t offset, std::span<const std::byte> data, bool fua)
{
    if (int err = inject(write_kind, offset, data.size()))
        return err;
    return inner_->write(offset, data, fua);
}

int FaultyBackend::flush()
{
    if (int err = inject(flush_kind, 0, 0))
        return err;
    return inner_->flush();
}

int FaultyBackend::trim(std::uint64_t offset, std::uint64_t length, bool fua)
{
    if (int err = inject(write_kind, offset, length, false))
        return err;
    return inner_->trim(offset, length, fua);
}

int FaultyBackend::write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua)
{
    if (int err = inject(write_kind, offset, length))
        return err;
    return inner_->write_zeroes(offset, length, may_trim, fua);
}

} // namespace nbdsched::backend
