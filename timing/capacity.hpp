// What a timing profile can serve, measured on a fresh model in virtual
// time: the yardstick a reservation sum is checked against.
#pragma once

#include <cstdint>

#include "timing/device_model.hpp"

namespace nbdsched::timing {

struct Capacity {
    double iops = 0;   // 4 KiB random reads at the model's queue depth; 0 = unknown
    double bps = 0;    // 1 MiB random reads
};

// Runs a fixed, seeded batch of random reads over [0, span) through `fresh`
// (a model no one else uses: its state moves).
Capacity measure_capacity(DeviceModel& fresh, std::uint64_t span);

}   // namespace nbdsched::timing
