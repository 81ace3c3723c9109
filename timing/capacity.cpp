#include "timing/capacity.hpp"

#include <algorithm>

namespace nbdsched::timing {

namespace {

// Requests of `block` bytes at random aligned offsets, kept queue_depth deep;
// the model serves them in order, so its completion times give the rate.
double rate(DeviceModel& model, std::uint64_t span, std::uint64_t block, unsigned count) {
    const std::uint64_t slots = std::max<std::uint64_t>(1, span / block);
    std::uint64_t x = 0x9e3779b97f4a7c15ull;   // splitmix64: the same batch every run
    Time start = Time{}, now = start, last = start;
    for (unsigned i = 0; i < count; ++i) {
        x += 0x9e3779b97f4a7c15ull;
        std::uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        last = std::max(last, model.submit(Io{Op::read, (z % slots) * block, block}, now));
    }
    const double seconds = std::chrono::duration<double>(last - start).count();
    return seconds > 0 ? count / seconds : 0;
}

}   // namespace

Capacity measure_capacity(DeviceModel& fresh, std::uint64_t span) {
    // All submitted at once: a rotational model serves in order, an SSD
    // model spreads them over its channels, as a full queue would.
    Capacity c;
    c.iops = rate(fresh, span, 4096, 512);
    c.bps = rate(fresh, span, 1 << 20, 128) * double(1 << 20);
    return c;
}

}   // namespace nbdsched::timing
