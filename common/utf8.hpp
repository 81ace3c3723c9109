// UTF-8 checks for text that comes from outside (a config file, a client,
// the kernel) on its way into JSON, Prometheus labels and logs, all of
// which are UTF-8 only.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace nbdsched {

// The offset of the first byte that does not start a well-formed UTF-8
// sequence (Unicode 15 table 3-7: no overlongs, no surrogates, nothing
// above U+10FFFF), or nullopt when all of `text` is UTF-8.
std::optional<std::size_t> invalid_utf8_at(std::string_view text);
inline bool is_utf8(std::string_view text) { return !invalid_utf8_at(text); }

// `text` for a log line or a table: well-formed UTF-8 is kept as it is,
// every other byte and the control characters (below 0x20, 0x7f) become
// "\xNN". A backslash is kept, so systemd's "\x2d" in unit names reads as
// it does in systemctl; the result is for people, never parsed back.
std::string printable(std::string_view text);

}   // namespace nbdsched
