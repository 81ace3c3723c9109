#include "common/utf8.hpp"

#include <cstdint>
#include <span>

#include "common/hex.hpp"

namespace nbdsched {

namespace {

// The length of the well-formed sequence at the start of `s`, 0 if none.
std::size_t sequence_length(std::string_view s) {
    const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
    const auto tail = [&](std::size_t i, unsigned lo = 0x80, unsigned hi = 0xbf) {
        return i < s.size() && b(i) >= lo && b(i) <= hi;
    };
    const unsigned c = b(0);
    if (c < 0x80) return 1;
    if (c >= 0xc2 && c <= 0xdf) return tail(1) ? 2 : 0;
    if (c >= 0xe0 && c <= 0xef) {
        const unsigned lo = c == 0xe0 ? 0xa0 : 0x80, hi = c == 0xed ? 0x9f : 0xbf;   // overlong, surrogates
        return tail(1, lo, hi) && tail(2) ? 3 : 0;
    }
    if (c >= 0xf0 && c <= 0xf4) {
        const unsigned lo = c == 0xf0 ? 0x90 : 0x80, hi = c == 0xf4 ? 0x8f : 0xbf;   // overlong, > U+10FFFF
        return tail(1, lo, hi) && tail(2) && tail(3) ? 4 : 0;
    }
    return 0;
}

}   // namespace

std::optional<std::size_t> invalid_utf8_at(std::string_view text) {
    for (std::size_t i = 0; i < text.size();) {
        const auto n = sequence_length(text.substr(i));
        if (n == 0) return i;
        i += n;
    }
    return std::nullopt;
}

std::string printable(std::string_view text) {
    std::string out;
    out.reserve(text.size());
    for (std::size_t i = 0; i < text.size();) {
        const auto n = sequence_length(text.substr(i));
        const auto c = static_cast<std::uint8_t>(text[i]);
        if (n == 0 || c < 0x20 || c == 0x7f) {
            out += "\\x" + to_hex(std::span(&c, 1));
            ++i;
        } else {
            out.append(text.substr(i, n));
            i += n;
        }
    }
    return out;
}

}   // namespace nbdsched
