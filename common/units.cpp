#include "common/units.hpp"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>

namespace nbdsched {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    return s;
}

bool iequals(std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        char x = a[i], y = b[i];
        if (x >= 'A' && x <= 'Z') x = char(x - 'A' + 'a');
        if (y >= 'A' && y <= 'Z') y = char(y - 'A' + 'a');
        if (x != y) return false;
    }
    return true;
}

// Splits "1.5GiB" into the number 1.5 and the suffix "GiB".
std::optional<std::pair<double, std::string_view>> split_number(std::string_view text) {
    text = trim(text);
    std::size_t i = 0;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    if (i == 0) return std::nullopt;
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + i, value);
    if (ec != std::errc() || ptr != text.data() + i || !std::isfinite(value)) return std::nullopt;
    return std::pair{value, trim(text.substr(i))};
}

}   // namespace

std::optional<std::uint64_t> parse_size(std::string_view text) {
    // In integers, not through a double: 9007199254740993 is not 2^53.
    text = trim(text);
    std::size_t i = 0;
    while (i < text.size() && ((text[i] >= '0' && text[i] <= '9') || text[i] == '.')) ++i;
    const std::string_view number = text.substr(0, i), suffix = trim(text.substr(i));
    const auto dot = number.find('.');
    const std::string_view whole = number.substr(0, dot);
    std::string_view fraction = dot == std::string_view::npos ? std::string_view{} : number.substr(dot + 1);
    if (fraction.find('.') != std::string_view::npos || (whole.empty() && fraction.empty())) return std::nullopt;
    while (!fraction.empty() && fraction.back() == '0') fraction.remove_suffix(1);
    // 10^18 still fits; a longer fraction of a power of 1024 is never whole bytes.
    if (fraction.size() > 18) return std::nullopt;
    struct Unit {
        std::string_view names[3];
        unsigned shift;
    };
    static constexpr std::array<Unit, 6> units{{
        {{"", "b", ""}, 0},
        {{"k", "kib", "kb"}, 10},
        {{"m", "mib", "mb"}, 20},
        {{"g", "gib", "gb"}, 30},
        {{"t", "tib", "tb"}, 40},
        {{"p", "pib", "pb"}, 50},
    }};
    const Unit* unit = nullptr;
    for (const auto& u : units)
        for (auto name : u.names)
            if ((!name.empty() || suffix.empty()) && iequals(name, suffix)) unit = &u;
    if (!unit) return std::nullopt;
    auto digits = [](std::string_view d, std::uint64_t& out) {
        out = 0;
        if (d.empty()) return true;
        auto [ptr, ec] = std::from_chars(d.data(), d.data() + d.size(), out);
        return ec == std::errc() && ptr == d.data() + d.size();
    };
    std::uint64_t w = 0, f = 0;
    if (!digits(whole, w) || !digits(fraction, f)) return std::nullopt;
    unsigned __int128 total = static_cast<unsigned __int128>(w) << unit->shift;
    if (f != 0) {
        std::uint64_t scale = 1;
        for (std::size_t n = 0; n < fraction.size(); ++n) scale *= 10;
        const unsigned __int128 part = static_cast<unsigned __int128>(f) << unit->shift;
        if (part % scale != 0) return std::nullopt;   // not a whole number of bytes
        total += part / scale;
    }
    if (total > std::numeric_limits<std::uint64_t>::max()) return std::nullopt;
    return static_cast<std::uint64_t>(total);
}

std::optional<Nanos> parse_duration(std::string_view text, Nanos bare_unit) {
    auto parts = split_number(text);
    if (!parts) return std::nullopt;
    auto [value, suffix] = *parts;
    double ns_per_unit = 0;
    if (suffix.empty()) ns_per_unit = double(bare_unit.count());
    else if (iequals(suffix, "ns")) ns_per_unit = 1;
    else if (iequals(suffix, "us") || suffix == "\xC2\xB5s") ns_per_unit = 1e3;
    else if (iequals(suffix, "ms")) ns_per_unit = 1e6;
    else if (iequals(suffix, "s")) ns_per_unit = 1e9;
    else if (iequals(suffix, "min")) ns_per_unit = 60e9;
    else if (iequals(suffix, "h")) ns_per_unit = 3600e9;   // the upper bound of the timeouts in limits:
    else return std::nullopt;
    double ns = std::round(value * ns_per_unit);
    if (ns > double(std::numeric_limits<std::int64_t>::max() / 2)) return std::nullopt;
    return Nanos(static_cast<std::int64_t>(ns));
}

std::string format_size(std::uint64_t bytes) {
    static const char* names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int unit = 0;
    std::uint64_t v = bytes;
    while (unit < 5 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        ++unit;
    }
    return std::to_string(v) + names[unit];
}

std::string format_duration(Nanos d) {
    auto ns = d.count();
    if (ns == 0) return "0";
    if (ns % 1'000'000'000 == 0) return std::to_string(ns / 1'000'000'000) + "s";
    if (ns % 1'000'000 == 0) return std::to_string(ns / 1'000'000) + "ms";
    if (ns % 1'000 == 0) return std::to_string(ns / 1'000) + "us";
    return std::to_string(ns) + "ns";
}

}   // namespace nbdsched
