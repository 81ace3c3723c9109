// Reading YAML nodes into typed values while collecting every error with its
// position and dotted key path, so one run of --check-config shows them all.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "config/yaml.hpp"

#include "config/config.hpp"

namespace nbdsched::config::detail {

// One value of a mapping (or one item of a list) on its way into a struct.
struct Field {
    std::string key;   // the last path component ("size"), "" for list items
    YAML::Node value;
    std::string path;   // "devices[0].size"
    Origin at;          // the value's position; the key's when the value is empty
    Origin key_at;      // the key's position (the item's for list items)
};

class Reader {
public:
    explicit Reader(std::string file) : file_(std::move(file)) {}

    const std::string& file() const { return file_; }
    Origin origin(const YAML::Mark& mark) const;
    Origin origin(const YAML::Node& node) const { return origin(node.Mark()); }

    void error(const Origin& at, std::string path, std::string message);
    void error(const Field& field, std::string message) { error(field.at, field.path, std::move(message)); }
    bool ok() const { return errors_.empty(); }
    // Every error so far, in file order (positionless ones last).
    std::vector<Error> take_errors();

    // Walks a mapping, calling `fn` for every key in `known`; reports a value
    // that is not a mapping, unknown keys (with a "did you mean") and repeated
    // keys. Returns false when `field.value` is not a mapping.
    bool read_map(const Field& field, std::initializer_list<std::string_view> known,
                  const std::function<void(const Field&)>& fn);
    // Like read_map but any scalar key is accepted (tunables, profile parameters).
    bool read_any_map(const Field& field, const std::function<void(const Field&)>& fn);
    // Walks a sequence, calling `fn` for each item ("devices[2]").
    bool read_list(const Field& field, const std::function<void(const Field&, std::size_t)>& fn);

    // Scalars. Each reports its own error and returns nullopt on failure.
    std::optional<std::string> string(const Field& field);
    std::optional<bool> boolean(const Field& field);
    std::optional<std::uint64_t> size(const Field& field);
    std::optional<std::uint64_t> integer(const Field& field, std::uint64_t min, std::uint64_t max);
    // One word out of `choices`, with a "did you mean" for near misses.
    std::optional<std::string> choice(const Field& field, std::initializer_list<std::string_view> choices);
    std::optional<std::string> choice_in(const Field& field, std::span<const std::string_view> choices);

private:
    bool scalar(const Field& field, std::string_view expected);
    bool walk_map(const Field& field, const std::function<void(const Field&)>& fn);

    std::string file_;
    std::vector<Error> errors_;
};

// "a sequence", "a mapping", "nothing", "'abc'": for "expected X, got Y".
std::string describe(const YAML::Node& node);

// The root of a document, as a Field with an empty path.
Field root_field(const Reader& reader, const YAML::Node& root);

}   // namespace nbdsched::config::detail
