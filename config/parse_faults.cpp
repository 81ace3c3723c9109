// devices[].faults: fault-injection rules (common/fault_rule.hpp), modelled
// on nbdkit's error and delay filters: per-operation errors at a rate or in
// an offset range, and added latency.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>

#include "config/parsers.hpp"
#include "config/suggest.hpp"

namespace nbdsched::config::detail {
namespace {

// Longer than this stalls the daemon's I/O threads past any drain timeout.
constexpr Nanos max_delay = std::chrono::seconds(60);

struct OpName {
    std::string_view name;
    unsigned bits;
};
constexpr OpName op_names[] = {{"read", fault_read}, {"write", fault_write}, {"flush", fault_flush}, {"trim", fault_trim}, {"zeroes", fault_zeroes}, {"any", fault_any}};

// The errors an NBD reply can carry (NBD_EPERM ... NBD_ESHUTDOWN).
struct ErrorName {
    std::string_view name;
    int value;
};
constexpr ErrorName error_names[] = {{"EIO", EIO}, {"ENOSPC", ENOSPC}, {"EPERM", EPERM}, {"ENOMEM", ENOMEM}, {"EINVAL", EINVAL}, {"EOVERFLOW", EOVERFLOW}, {"ENOTSUP", ENOTSUP}, {"ESHUTDOWN", ESHUTDOWN}};

template <class Table>
std::vector<std::string_view> names_of(const Table& table) {
    std::vector<std::string_view> out;
    for (const auto& e : table) out.push_back(e.name);
    return out;
}

std::optional<unsigned> read_op_word(Reader& r, const Field& f) {
    auto word = r.choice(f, {"read", "write", "flush", "trim", "zeroes", "any"});
    if (!word) return std::nullopt;
    for (const auto& e : op_names)
        if (e.name == *word) return e.bits;
    return std::nullopt;
}

// op: read | [read, write]
std::optional<unsigned> read_ops(Reader& r, const Field& f) {
    if (!f.value.IsSequence()) return read_op_word(r, f);
    unsigned ops = 0;
    bool ok = true;
    r.read_list(f, [&](const Field& item, std::size_t) {
        if (auto bits = read_op_word(r, item)) ops |= *bits;
        else ok = false;
    });
    if (ok && ops == 0) r.error(f, "an empty list of operations matches nothing");
    if (!ok || ops == 0) return std::nullopt;
    return ops;
}

// error: EIO (case does not matter, as errno names are often written eio).
std::optional<int> read_error(Reader& r, const Field& f) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    std::string upper = *text;
    std::transform(upper.begin(), upper.end(), upper.begin(), [](unsigned char c) { return std::toupper(c); });
    for (const auto& e : error_names)
        if (e.name == upper) return e.value;
    auto names = names_of(error_names);
    r.error(f, "expected one of " + join(names) + ", got " + describe(f.value) + did_you_mean(upper, names));
    return std::nullopt;
}

// rate: 0.01 or 1%
std::optional<double> read_rate(Reader& r, const Field& f) {
    if (!r.string(f)) return std::nullopt;
    std::string_view text = f.value.Scalar();
    const bool percent = !text.empty() && text.back() == '%';
    if (percent) text.remove_suffix(1);
    double value = -1;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || text.empty()) {
        r.error(f, "expected a probability 0..1 or a percentage (e.g. 0.01 or 1%), got " + describe(f.value));
        return std::nullopt;
    }
    if (percent) value /= 100;
    if (value >= 0 && value <= 1) return value;
    r.error(f, "out of range: " + f.value.Scalar() + " (allowed 0..1, or 0%..100%)");
    return std::nullopt;
}

std::optional<Nanos> read_delay(Reader& r, const Field& f) {
    auto text = r.string(f);
    if (!text) return std::nullopt;
    auto d = parse_duration(*text);
    if (!d) {
        r.error(f, "bad duration " + describe(f.value) + " (use e.g. 50ms, 200us, 1s; a bare number is ms)");
        return std::nullopt;
    }
    if (*d <= max_delay) return d;
    r.error(f, "out of range: " + *text + " (at most 60s)");
    return std::nullopt;
}

// A rule and where it is, for Parsed (FaultRule itself is position-free).
struct Entry {
    FaultRule rule;
    Origin origin;
};

// The checks across keys of one rule, once all are read.
void check_rule(Reader& r, const Parsed<Entry>& p, std::uint64_t device_size) {
    const FaultRule& rule = p.value.rule;
    const bool has_error = p.at.count("error") || p.at.count("rate");
    if (!has_error && !p.at.count("delay"))
        r.error(p.value.origin, p.path, "this rule does nothing: give it an error, a rate or a delay");
    if (p.at.count("seed") && !p.at.count("rate"))
        r.error(p.where("seed"), p.key("seed"), "a seed only matters with a rate");
    const bool ranged = p.at.count("offset") || p.at.count("length");
    if (ranged && rule.ops == fault_flush) {
        const char* key = p.at.count("offset") ? "offset" : "length";
        r.error(p.where(key), p.key(key), "a flush has no offset range: this rule would never match");
    }
    if (p.at.count("offset") && device_size > 0 && rule.offset >= device_size)
        r.error(p.where("offset"), p.key("offset"),
                "offset " + format_size(rule.offset) + " is past the end of the device (" + format_size(device_size) + ")");
}

std::optional<FaultRule> parse_fault(Reader& r, const Field& item, std::uint64_t device_size) {
    Parsed<Entry> p(item);
    FaultRule& rule = p.value.rule;
    bool ok = r.read_map(item, {"op", "error", "rate", "seed", "offset", "length", "delay"}, [&](const Field& f) {
        p.at[f.key] = f.at;
        if (f.key == "op") {
            if (auto v = read_ops(r, f)) rule.ops = *v;
        } else if (f.key == "error") {
            if (auto v = read_error(r, f)) rule.error = *v;
        } else if (f.key == "rate") {
            if (auto v = read_rate(r, f)) rule.rate = *v;
        } else if (f.key == "seed") {
            if (auto v = r.integer(f, 0, UINT64_MAX)) rule.seed = *v;
        } else if (f.key == "offset") {
            if (auto v = r.size(f)) rule.offset = *v;
        } else if (f.key == "length") {
            auto v = r.size(f);
            if (v && *v == 0) return r.error(f, "a length of 0 matches nothing");
            if (v) rule.length = *v;
        } else if (f.key == "delay") {
            if (auto v = read_delay(r, f)) rule.delay = *v;
        }
    });
    if (!ok) return std::nullopt;
    // A rate alone means "fail with EIO at that rate", as nbdkit's error-rate does.
    if (rule.error == 0 && p.at.count("rate")) rule.error = EIO;
    check_rule(r, p, device_size);
    return rule;
}

}   // namespace

std::vector<FaultRule> parse_faults(Reader& r, const Field& field, std::uint64_t device_size) {
    std::vector<FaultRule> rules;
    r.read_list(field, [&](const Field& item, std::size_t) {
        if (auto rule = parse_fault(r, item, device_size)) rules.push_back(*rule);
    });
    return rules;
}

}   // namespace nbdsched::config::detail
