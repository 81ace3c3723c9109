// Device profiles by name: "hdd", "ssd", "nvme" (and "none": no timing model,
// the backend's own speed). Parameters override the profile's defaults and
// take units: hdd {rpm, settle, avg_seek, full_stroke_seek, transfer_rate,
// max_io, optimal_io, capacity, queue_depth}; ssd/nvme {read_latency,
// write_latency, channels, queue_depth, bandwidth, max_io, optimal_io}.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "timing/device_model.hpp"

namespace nbdsched::timing {

// Returns the model, or nullptr with `error` set on an unknown profile or a
// bad parameter. Profile "none" returns nullptr with `error` empty.
std::unique_ptr<DeviceModel> make_model(std::string_view profile,
                                        const std::map<std::string, std::string>& params,
                                        std::string& error);

// The error make_model would report, or empty: for config validation.
std::string check_profile(std::string_view profile, const std::map<std::string, std::string>& params);

}   // namespace nbdsched::timing
