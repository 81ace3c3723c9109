// "name=value" command-line overrides (--set, --device), shared by the CLIs.
#pragma once

#include <string>
#include <vector>

namespace nbdsched::sim {

// Adds every "name=value" of `items` to `into`; returns the first malformed
// item, or empty when all were fine.
template <class Map>
std::string add_assignments(const std::vector<std::string>& items, Map& into) {
    for (const auto& item : items) {
        auto eq = item.find('=');
        if (eq == std::string::npos || eq == 0) return item.empty() ? std::string("=") : item;
        into[item.substr(0, eq)] = item.substr(eq + 1);
    }
    return {};
}

}   // namespace nbdsched::sim
