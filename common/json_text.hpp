// JSON as text, for every JSON the daemon and `nbdsched ctl` write (control
// replies and requests, the hand-over state). nlohmann's plain dump() throws
// type_error.316 on a string that is not UTF-8, and such a string can come
// from outside: a cgroup name, a TLS identity, the text of a parse error
// that quotes a client's bytes. Thrown on the event loop, that ends the
// daemon. Here every ill-formed byte becomes U+FFFD instead; well-formed
// text is written as it is (no \u escapes).
#pragma once

#include <string>

namespace nbdsched {

// `Json` is nlohmann::json or nlohmann::ordered_json; `indent` as in dump()
// (-1: one line).
template <class Json>
std::string json_text(const Json& j, int indent = -1) {
    return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}   // namespace nbdsched
