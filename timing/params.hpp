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

// The largest max_io / optimal_io a profile takes (the models keep them in 32 bits).
inline constexpr std::uint64_t max_io_cap = 1ull << 31;

class ParamReader {
public:
    ParamReader(std::string_view profile, const Params& params) : profile_(profile), params_(params) {}

    // Each returns `fallback` when the key is absent, and on a bad value
    // records an error (first one wins) and returns `fallback`.
    // At most max_duration: a longer seek or latency stalls every request.
    Nanos duration(std::string_view key, Nanos fallback);
    // 1..max bytes.
    std::uint64_t size(std::string_view key, std::uint64_t fallback, std::uint64_t max = UINT64_MAX);
    unsigned count(std::string_view key, unsigned fallback, unsigned min, unsigned max);
    // Bytes per second: "180MB/s", "180MiB/s", "1.5GiB/s" or a bare number of
    // MiB/s; finite and at least min_rate (a transfer time must fit in Nanos).
    double rate(std::string_view key, double fallback);

    static constexpr Nanos max_duration = std::chrono::seconds(10);
    static constexpr double min_rate = 1024;   // bytes per second

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
