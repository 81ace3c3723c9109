// The daemon's own counters, as `nbdsched ctl --socket PATH stats --json`
// prints them, for tests that check what the daemon saw (errors counted,
// in-flight high-water marks). The daemon's config needs `control: PATH`.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace nbdsched::reliability {

// The whole document; throws std::runtime_error when ctl fails.
nlohmann::json ctl_stats(const std::string& control_socket);
// The entry of one device in it; throws when there is none.
nlohmann::json device_stats(const std::string& control_socket, const std::string& device);

} // namespace nbdsched::reliability
