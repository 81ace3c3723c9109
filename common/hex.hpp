// Bytes as hexadecimal digits and back (psktool's key files, the hand-over
// state's unread bytes).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace nbdsched {

// Two lower-case digits per byte.
std::string to_hex(std::span<const std::uint8_t> bytes);
// nullopt when `text` has an odd length or a character other than 0-9, a-f.
std::optional<std::vector<std::uint8_t>> from_hex(std::string_view text);

}   // namespace nbdsched
