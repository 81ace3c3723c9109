// exports[]: what clients connect to, a whole device or a window of it.
#include <cstdio>

#include "config/parsers.hpp"

namespace nbdsched::config::detail {
namespace {

// NBD_OPT_GO/EXPORT_NAME carry names and descriptions of at most 4096 bytes.
constexpr std::size_t nbd_max_string = 4096;

// The first C0 or C1 control character (a newline, ESC, U+0085) as
// "U+001B"; empty when there is none. Names and descriptions reach log
// lines, ctl tables and metric labels: a newline there forges a log line.
std::string control_character(std::string_view text) {
    for (std::size_t i = 0; i < text.size(); ++i) {
        const auto c = static_cast<unsigned char>(text[i]);
        const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0u;
        const bool c1 = c == 0xc2 && next >= 0x80 && next <= 0x9f;   // U+0080..U+009F in UTF-8
        if (c < 0x20 || c == 0x7f || c1) {
            char code[8];
            std::snprintf(code, sizeof code, "U+%04X", c1 ? next : c);
            return code;
        }
    }
    return {};
}

}   // namespace

std::optional<Parsed<Export>> parse_export(Reader& r, const Field& item) {
    Parsed<Export> p(item);
    Export& e = p.value;
    bool ok = r.read_map(item, {"name", "device", "offset", "size", "readonly", "description", "group", "allow"},
                         [&](const Field& f) {
                             p.at[f.key] = f.at;
                             const std::string& k = f.key;
                             if (k == "name" || k == "description") {
                                 auto v = r.string(f);
                                 if (!v) return;
                                 if (v->size() > nbd_max_string)
                                     return r.error(f, "longer than the NBD limit of 4096 bytes");
                                 if (k == "name" && v->empty()) return r.error(f, "empty export name");
                                 if (auto c = control_character(*v); !c.empty())
                                     return r.error(f, "a control character (" + c + ") in " +
                                                           (k == "name" ? "an export name" : "a description"));
                                 (k == "name" ? e.name : e.description) = *v;
                             } else if (k == "device") {
                                 if (auto v = read_name(r, f)) e.device = *v;
                             } else if (k == "offset") {
                                 if (auto v = r.size(f)) e.offset = *v;
                             } else if (k == "size") {
                                 auto v = r.size(f);
                                 if (v && *v == 0) return r.error(f, "an export needs a size above 0 (omit it for the rest of the device)");
                                 if (v) e.size = *v;
                             } else if (k == "readonly") {
                                 if (auto v = r.boolean(f)) e.readonly = *v;
                             } else if (k == "group") {
                                 if (auto v = read_name(r, f)) e.group = *v;
                             } else if (k == "allow") {
                                 e.allow = parse_allow(r, f);
                             }
                         });
    if (!ok) return std::nullopt;
    if (p.at.count("device") == 0)
        r.error(item.at, p.key("device"), "missing: an export needs the device it serves");
    return named(r, item, p, "export");
}

}   // namespace nbdsched::config::detail
