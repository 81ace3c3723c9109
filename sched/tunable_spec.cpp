#include "sched/tunable_spec.hpp"

#include <algorithm>
#include <charconv>
#include <optional>

#include "common/units.hpp"

namespace nbdsched::sched {
namespace {

std::string_view strip(std::string_view s) {
    auto first = s.find_first_not_of(" \t");
    if (first == std::string_view::npos) return {};
    return s.substr(first, s.find_last_not_of(" \t") - first + 1);
}

std::optional<std::uint64_t> whole_number(std::string_view text) {
    std::uint64_t v = 0;
    auto end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || ptr != end) return std::nullopt;
    return v;
}

std::optional<std::uint64_t> flag(std::string_view text) {
    for (auto yes : {"1", "on", "true", "yes"})
        if (text == yes) return 1;
    for (auto no : {"0", "off", "false", "no"})
        if (text == no) return 0;
    return std::nullopt;
}

std::optional<std::uint64_t> parse_value(Unit unit, std::string_view text) {
    switch (unit) {
    case Unit::duration:
        if (auto d = parse_duration(text)) return std::uint64_t(d->count());
        return std::nullopt;
    case Unit::count:
    case Unit::sectors: return whole_number(text);
    case Unit::kib:
        if (auto n = whole_number(text)) return n;
        if (auto bytes = parse_size(text); bytes && *bytes % 1024 == 0) return *bytes / 1024;
        return std::nullopt;   // parse_tunable says why a size of bytes is refused
    case Unit::flag: return flag(text);
    }
    return std::nullopt;
}

std::string_view kind(Unit unit) {
    switch (unit) {
    case Unit::duration: return "duration";
    case Unit::count:
    case Unit::sectors: return "number";
    case Unit::kib: return "size";
    case Unit::flag: return "value";
    }
    return "value";
}

// What an error message asks for instead.
std::string wanted(const TunableSpec& spec) {
    std::string out;
    switch (spec.unit) {
    case Unit::duration: out = "a duration, e.g. 8ms, 100us, 0"; break;
    case Unit::count: out = "a whole number"; break;
    case Unit::sectors: out = "a whole number of sectors"; break;
    case Unit::kib: out = "KiB up to " + std::to_string(kMaxKib) + " or a size below 2TiB, e.g. 16384, 16MiB"; break;
    case Unit::flag: out = "0 or 1"; break;
    }
    if (spec.below_min_is_error) out += " from " + format_tunable(spec, spec.min);
    if (spec.auto_value.of) out += ", or auto";
    return out;
}

// The largest value taken: spec.max (above it: clamped), or for KiB kMaxKib (above it: refused).
std::uint64_t upper(const TunableSpec& spec) {
    return spec.unit == Unit::kib ? std::min(spec.max, kMaxKib) : spec.max;
}

std::string range_markdown(const TunableSpec& spec) {
    std::string lo = spec.min > 0 ? format_tunable(spec, spec.min) : "";
    std::string hi = spec.device_max.of        ? std::string(spec.device_max.text)
                     : upper(spec) != kNoLimit ? format_tunable(spec, upper(spec))
                                               : "";
    if (!lo.empty() && !hi.empty()) return " " + lo + ".." + hi;
    if (!lo.empty()) return " ≥ " + lo;
    if (!hi.empty()) return " ≤ " + hi;
    return {};
}

std::string values_markdown(const TunableSpec& spec) {
    std::string out;
    switch (spec.unit) {
    case Unit::duration: out = "duration" + range_markdown(spec); break;
    case Unit::count: out = "whole number" + range_markdown(spec); break;
    case Unit::sectors: out = "sectors" + range_markdown(spec); break;
    case Unit::kib: out = "KiB" + range_markdown(spec) + ", or a size of whole KiB (`16MiB`)"; break;
    case Unit::flag: out = "0 or 1"; break;
    }
    if (spec.auto_value.of) out += ", `auto`";
    return out;
}

std::string default_markdown(const TunableSpec& spec) {
    if (spec.default_value == "auto") return "**`auto`**: " + std::string(spec.auto_value.text);
    std::string out(spec.default_value);
    if (spec.unit == Unit::kib) out += " KiB";
    if (spec.unit == Unit::sectors) out += " sectors";
    return out;
}

}   // namespace

std::uint64_t idle_on_rotational(const DeviceTraits& device) {
    return device.rotational ? in_ns(std::chrono::milliseconds(8)) : 0;
}

ParsedTunable parse_tunable(const TunableSpec& spec, std::string_view text, const DeviceTraits& device) {
    std::string_view value = strip(text);
    std::uint64_t max = spec.max;
    if (spec.device_max.of) max = std::min(max, spec.device_max.of(device));
    if (spec.auto_value.of && value == "auto")
        return {std::clamp(spec.auto_value.of(device), std::min(spec.min, max), max), {}};
    auto parsed = parse_value(spec.unit, value);
    // Rounding 512b down to 0 KiB would switch back_seek_max off without a word.
    if (auto bytes = spec.unit == Unit::kib && !parsed ? parse_size(value) : std::nullopt; bytes && *bytes % 1024)
        return {0, std::string(spec.name) + ": '" + std::string(text) + "' is " + std::to_string(*bytes) +
                       " bytes, not a whole number of KiB (want " + wanted(spec) + ")"};
    if (!parsed || (*parsed < spec.min && spec.below_min_is_error) || (spec.unit == Unit::kib && *parsed > kMaxKib))
        return {0, std::string(spec.name) + ": bad " + std::string(kind(spec.unit)) + " '" + std::string(text) +
                       "' (want " + wanted(spec) + ")"};
    return {std::clamp(*parsed, std::min(spec.min, max), max), {}};
}

std::string format_tunable(const TunableSpec& spec, std::uint64_t value) {
    if (spec.unit == Unit::duration) return format_duration(Nanos(std::int64_t(value)));
    return std::to_string(value);
}

std::vector<std::string> tunable_names(const std::vector<TunableSpec>& specs) {
    std::vector<std::string> names;
    for (const auto& s : specs) names.emplace_back(s.name);
    return names;
}

std::string unknown_tunable_error(std::string_view policy, const std::vector<TunableSpec>& specs,
                                  std::string_view name) {
    std::string names;
    for (const auto& s : specs) names += (names.empty() ? "" : ", ") + std::string(s.name);
    return std::string(policy) + " has no tunable '" + std::string(name) + "' (it has: " +
           (names.empty() ? "none" : names) + ")";
}

std::string tunables_markdown(const std::vector<TunableSpec>& specs) {
    std::string out = "| tunable | default | values | what it does |\n|---|---|---|---|\n";
    for (const auto& s : specs)
        out += "| `" + std::string(s.name) + "` | " + default_markdown(s) + " | " + values_markdown(s) + " | " +
               std::string(s.why) + " |\n";
    return out;
}

}   // namespace nbdsched::sched
