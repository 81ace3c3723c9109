#include "timing/params.hpp"

#include <charconv>
#include <cmath>
#include <optional>

namespace nbdsched::timing {

const std::string* ParamReader::find(std::string_view key) {
    auto it = params_.find(std::string(key));
    if (it == params_.end()) return nullptr;
    used_.insert(it->first);
    return &it->second;
}

void ParamReader::fail(std::string message) {
    if (error_.empty()) error_ = profile_ + ": " + std::move(message);
}

Nanos ParamReader::duration(std::string_view key, Nanos fallback) {
    const std::string* value = find(key);
    if (!value) return fallback;
    auto parsed = parse_duration(*value);
    if (!parsed) {
        fail(std::string(key) + ": bad duration '" + *value + "' (e.g. 4ms, 100us)");
        return fallback;
    }
    if (*parsed > max_duration) {
        fail(std::string(key) + ": " + *value + " is longer than " + format_duration(max_duration));
        return fallback;
    }
    return *parsed;
}

std::uint64_t ParamReader::size(std::string_view key, std::uint64_t fallback, std::uint64_t max) {
    const std::string* value = find(key);
    if (!value) return fallback;
    auto parsed = parse_size(*value);
    if (!parsed || *parsed == 0) {
        fail(std::string(key) + ": bad size '" + *value + "' (e.g. 1280KiB, 1TiB)");
        return fallback;
    }
    if (*parsed > max) {
        fail(std::string(key) + ": " + *value + " is more than " + format_size(max));
        return fallback;
    }
    return *parsed;
}

unsigned ParamReader::count(std::string_view key, unsigned fallback, unsigned min, unsigned max) {
    const std::string* value = find(key);
    if (!value) return fallback;
    unsigned n = 0;
    auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
    if (ec != std::errc() || ptr != value->data() + value->size() || n < min || n > max) {
        fail(std::string(key) + ": expected an integer in " + std::to_string(min) + ".." +
             std::to_string(max) + ", got '" + *value + "'");
        return fallback;
    }
    return n;
}

double ParamReader::rate(std::string_view key, double fallback) {
    const std::string* value = find(key);
    if (!value) return fallback;
    std::string_view text = *value;
    // A bare number ("180", "182.5") means MiB/s, the unit disk data sheets use.
    double mib = 0;
    std::optional<double> rate;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), mib);
    if (ec == std::errc() && ptr == text.data() + text.size()) {
        rate = mib * 1024 * 1024;
    } else if (text.size() > 2 && text.substr(text.size() - 2) == "/s") {
        if (auto bytes = parse_size(text.substr(0, text.size() - 2))) rate = double(*bytes);
    }
    if (!rate) {
        fail(std::string(key) + ": bad rate '" + *value + "' (e.g. 180MB/s, 2GiB/s, 180)");
        return fallback;
    }
    // inf would make every transfer free, a rate near 0 overflows the transfer time.
    if (!std::isfinite(*rate) || *rate < min_rate) {
        fail(std::string(key) + ": rate '" + *value + "' must be finite and at least 1KiB/s");
        return fallback;
    }
    return *rate;
}

std::string ParamReader::finish() {
    for (const auto& [key, value] : params_)
        if (!used_.count(key)) fail("unknown parameter '" + key + "'");
    return error_;
}

}   // namespace nbdsched::timing
