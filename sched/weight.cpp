#include "sched/weight.hpp"

#include <charconv>

namespace nbdsched::sched {

namespace {
std::string range() {
    return std::to_string(min_weight) + ".." + std::to_string(max_weight);
}
}   // namespace

std::string check_weight(std::uint64_t weight) {
    if (weight >= min_weight && weight <= max_weight) return {};
    return "out of range: " + std::to_string(weight) + " (allowed " + range() + ")";
}

std::string parse_weight(const std::string& text, unsigned& weight) {
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ptr != text.data() + text.size() || (ec != std::errc() && ec != std::errc::result_out_of_range))
        return "expected a whole number " + range() + ", got '" + text + "'";
    if (ec == std::errc::result_out_of_range) return "out of range: " + text + " (allowed " + range() + ")";
    if (auto why = check_weight(value); !why.empty()) return why;
    weight = static_cast<unsigned>(value);
    return {};
}

}   // namespace nbdsched::sched
