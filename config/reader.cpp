#include "config/reader.hpp"

#include <algorithm>
#include <charconv>
#include <map>

#include "common/hex.hpp"
#include "common/units.hpp"
#include "common/utf8.hpp"
#include "config/suggest.hpp"

namespace nbdsched::config::detail {

std::string describe(const YAML::Node& node) {
    switch (node.Type()) {
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    case YAML::NodeType::Scalar: return "'" + node.Scalar() + "'";
    default: return "nothing";
    }
}

Field root_field(const Reader& reader, const YAML::Node& root) {
    Origin at = reader.origin(root);
    return Field{"", root, "", at, at};
}

Origin Reader::origin(const YAML::Mark& mark) const {
    if (mark.is_null()) return Origin{file_, 0, 0};
    return Origin{file_, mark.line + 1, mark.column + 1};
}

void Reader::error(const Origin& at, std::string path, std::string message) {
    errors_.push_back(Error{at, std::move(path), std::move(message)});
}

std::vector<Error> Reader::take_errors() {
    auto position = [](const Error& e) {
        // Positionless errors (line 0) go last.
        return std::pair{e.origin.line == 0 ? INT32_MAX : e.origin.line, e.origin.column};
    };
    std::stable_sort(errors_.begin(), errors_.end(),
                     [&](const Error& a, const Error& b) { return position(a) < position(b); });
    return std::move(errors_);
}

bool Reader::walk_map(const Field& field, const std::function<void(const Field&)>& fn) {
    if (!field.value.IsMap()) {
        error(field, "expected a mapping (key: value), got " + describe(field.value));
        return false;
    }
    std::map<std::string, Origin> seen;
    for (auto it = field.value.begin(); it != field.value.end(); ++it) {
        const YAML::Node key = it->first;   // a copy: `it->` is a temporary proxy
        if (!key.IsScalar()) {
            error(origin(key), field.path, "keys must be words, got " + describe(key));
            continue;
        }
        std::string name = key.Scalar();
        std::string path = field.path.empty() ? name : field.path + "." + name;
        const YAML::Node value = it->second;
        // yaml-cpp marks an empty value at the next token; the key is where it is.
        Origin at = value.IsNull() || value.Mark().is_null() ? origin(key) : origin(value);
        auto [first, inserted] = seen.emplace(name, origin(key));
        if (!inserted) {
            error(origin(key), path, "repeated key (first at " + first->second.str() + ")");
            continue;
        }
        fn(Field{name, value, path, at, origin(key)});
    }
    return true;
}

bool Reader::read_map(const Field& field, std::initializer_list<std::string_view> known,
                      const std::function<void(const Field&)>& fn) {
    std::vector<std::string_view> names(known);
    return walk_map(field, [&](const Field& f) {
        if (std::find(names.begin(), names.end(), f.key) == names.end()) {
            std::string hint = did_you_mean(f.key, names);
            if (hint.empty()) hint = " (known keys: " + join(names) + ")";
            // Point at the key, not at its value: the key is what is wrong.
            error(f.key_at, f.path, "unknown key" + hint);
            return;
        }
        fn(f);
    });
}

bool Reader::read_any_map(const Field& field, const std::function<void(const Field&)>& fn) {
    return walk_map(field, fn);
}

bool Reader::read_list(const Field& field, const std::function<void(const Field&, std::size_t)>& fn) {
    if (!field.value.IsSequence()) {
        error(field, "expected a list (- item), got " + describe(field.value));
        return false;
    }
    std::size_t index = 0;
    for (const auto& item : field.value) {
        std::string path = field.path + "[" + std::to_string(index) + "]";
        Origin at = item.Mark().is_null() ? field.at : origin(item);
        fn(Field{"", item, path, at, at}, index);
        ++index;
    }
    return true;
}

bool Reader::scalar(const Field& field, std::string_view expected) {
    if (field.value.IsScalar()) return true;
    error(field, "expected " + std::string(expected) + ", got " + describe(field.value));
    return false;
}

std::optional<std::string> Reader::string(const Field& field) {
    if (!scalar(field, "a string")) return std::nullopt;
    // Names and paths go on into ctl's JSON, metric labels, logs and NBD
    // replies, which are UTF-8 only (so is a YAML file).
    const std::string& text = field.value.Scalar();
    if (auto at = invalid_utf8_at(text)) {
        const auto byte = static_cast<std::uint8_t>(text[*at]);
        error(field, "not valid UTF-8: byte " + std::to_string(*at) + " (0x" + to_hex({&byte, 1}) + ") of '" +
                         printable(text) + "'");
        return std::nullopt;
    }
    return text;
}

std::optional<bool> Reader::boolean(const Field& field) {
    if (!scalar(field, "true or false")) return std::nullopt;
    bool value = false;
    if (YAML::convert<bool>::decode(field.value, value)) return value;
    error(field, "expected true or false, got " + describe(field.value));
    return std::nullopt;
}

std::optional<std::uint64_t> Reader::size(const Field& field) {
    if (!scalar(field, "a size (e.g. 512MiB)")) return std::nullopt;
    if (auto bytes = parse_size(field.value.Scalar())) return bytes;
    error(field, "bad size " + describe(field.value) + " (use e.g. 4096, 64KiB, 512MiB, 1GiB, 2TiB)");
    return std::nullopt;
}

std::optional<std::uint64_t> Reader::integer(const Field& field, std::uint64_t min, std::uint64_t max) {
    std::string range = std::to_string(min) + ".." + std::to_string(max);
    if (!scalar(field, "a whole number " + range)) return std::nullopt;
    const std::string& text = field.value.Scalar();
    std::uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec == std::errc() && ptr == text.data() + text.size() && !text.empty()) {
        if (value >= min && value <= max) return value;
        error(field, "out of range: " + text + " (allowed " + range + ")");
        return std::nullopt;
    }
    error(field, "expected a whole number " + range + ", got " + describe(field.value));
    return std::nullopt;
}

std::optional<std::string> Reader::choice(const Field& field, std::initializer_list<std::string_view> choices) {
    return choice_in(field, std::span(choices.begin(), choices.size()));
}

std::optional<std::string> Reader::choice_in(const Field& field, std::span<const std::string_view> choices) {
    std::vector<std::string_view> words(choices.begin(), choices.end());
    if (!scalar(field, "one of " + join(words))) return std::nullopt;
    const std::string& text = field.value.Scalar();
    if (std::find(words.begin(), words.end(), text) != words.end()) return text;
    std::string hint = did_you_mean(text, words);
    error(field, "expected one of " + join(words) + ", got " + describe(field.value) + hint);
    return std::nullopt;
}

}   // namespace nbdsched::config::detail
