#include "timing/capacity.hpp"

#include <algorithm>

namespace nbdsched::timing {

namespace {

// Requests of `block` bytes at random aligned offsets, all submitted at
// `start` (queue_depth deep or more: the model serves them in order), so
// their completion times give the rate. `end` is when the last completes.
struct Batch {
    double per_second = 0;
    Time end{};
};

Batch batch(DeviceModel& model, Time start, std::uint64_t span, std::uint64_t block, unsigned count) {
    const std::uint64_t slots = std::max<std::uint64_t>(1, span / block);
    std::uint64_t x = 0x9e3779b97f4a7c15ull;   // splitmix64: the same batch every run
    Batch b{0, start};
    for (unsigned i = 0; i < count; ++i) {
        x += 0x9e3779b97f4a7c15ull;
        std::uint64_t z = x;
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        b.end = std::max(b.end, model.submit(Io{Op::read, (z % slots) * block, block}, start));
    }
    const double seconds = std::chrono::duration<double>(b.end - start).count();
    b.per_second = seconds > 0 ? count / seconds : 0;
    return b;
}

}   // namespace

Capacity measure_capacity(DeviceModel& fresh, std::uint64_t span) {
    // All submitted at once: a rotational model serves in order, an SSD
    // model spreads them over its channels, as a full queue would.
    // The 1 MiB batch starts when the 4 KiB one has completed: the model is
    // idle again then, so the time measured is the 1 MiB reads' own (started
    // at 0, it would include the 4 KiB batch's seconds: an hdd's byte rate a
    // third of what it serves).
    const Batch small = batch(fresh, Time{}, span, 4096, 512);
    const Batch large = batch(fresh, small.end, span, 1 << 20, 128);
    Capacity c;
    c.iops = small.per_second;
    c.bps = large.per_second * double(1 << 20);
    return c;
}

}   // namespace nbdsched::timing
