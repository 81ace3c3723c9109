// Helpers for the config tests: load a YAML text and look for one error.
#pragma once

#include <doctest/doctest.h>

#include <string>

#include "config/config.hpp"

namespace nbdsched::config::test {

// The devices/exports every test document needs, to append to a fragment.
inline const char* minimal_tail =
    "devices:\n"
    "  - {name: d0, size: 1GiB}\n"
    "exports:\n"
    "  - {name: e0, device: d0}\n";

inline std::string all_errors(const LoadResult& result) {
    std::string out;
    for (const auto& e : result.errors) out += e.str() + "\n";
    return out;
}

// Checks that `result` has an error at `key` on line/column whose message
// contains `words`.
inline void expect_error(const LoadResult& result, const std::string& key, int line, int column,
                         const std::string& words) {
    INFO("errors:\n"
         << all_errors(result));
    CHECK_FALSE(result.config.has_value());
    const Error* found = nullptr;
    for (const auto& e : result.errors)
        if (e.key == key && e.message.find(words) != std::string::npos) found = &e;
    REQUIRE_MESSAGE(found != nullptr, "no error at key '" << key << "' containing '" << words << "'");
    CHECK(found->origin.line == line);
    CHECK(found->origin.column == column);
    CHECK(found->origin.file == "test.yaml");
}

inline LoadResult load(const std::string& yaml) { return load_string(yaml, "test.yaml"); }

}   // namespace nbdsched::config::test
