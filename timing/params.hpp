// Reads a profile's parameter overrides ("rpm: 7200", "avg_seek: 4ms") with
// units, remembers the first error and reports keys nobody asked for, so a
// typo in YAML is an error rather than a silently ignored setting.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>

#include "common/units.hpp"

namespace nbdsched::timing {

using Params = std::map<std::string, std::string>;

class ParamReader {
public:
    ParamReader(std::string_view profile, const Params& params) : profile_(profile), params_(params) {}

    // Each returns `fallback` when the key is absent, and on a bad value
    // records an error (first one wins) and returns `fallback`.
    Nanos duration(std::string_view key, Nanos fallback);
    std::uint64_t size(std::string_view key, std::uint64_t fallback);
    unsigned count(std::string_view key, unsigned fallback, unsigned min, unsigned max);
    // Bytes per second: "180MB/s", "180MiB/s", "1.5GiB/s" or a bare number of MiB/s.
    double rate(std::string_view key, double fallback);

    bool has(std::string_view key) const { return params_.count(std::string(key)) != 0; }
    void fail(std::string message);
    // Reports unknown keys; returns the first error or empty.
    std::string finish();

private:
    const std::string* find(std::string_view key);

    std::string profile_;
    const Params& params_;
    std::set<std::string> used_;
    std::string error_;
};

}   // namespace nbdsched::timing
