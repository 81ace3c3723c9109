// groups[] (tenants with weights), rules[] (which client goes to which group)
// and the names both use.
#include "config/parsers.hpp"

#include "sched/weight.hpp"

namespace nbdsched::config::detail {
namespace {

bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.';
}

void parse_match(Reader& r, const Field& field, Parsed<Rule>& p) {
    Rule& rule = p.value;
    r.read_map(field, {"cgroup", "uid", "gid", "address", "export"}, [&](const Field& f) {
        p.at[f.key] = f.at;
        if (f.key == "cgroup") {
            if (auto v = read_cgroup(r, f)) rule.cgroup = *v;
        } else if (f.key == "uid" || f.key == "gid") {
            if (auto v = read_id(r, f)) (f.key == "uid" ? rule.uid : rule.gid) = *v;
        } else if (f.key == "address") {
            if (auto v = read_address(r, f)) rule.address = *v;
        } else if (f.key == "export") {
            if (auto v = r.string(f)) rule.export_name = *v;
        }
    });
}

}   // namespace

std::optional<std::string> read_name(Reader& r, const Field& field) {
    auto v = r.string(field);
    if (!v) return std::nullopt;
    bool ok = !v->empty() && v->size() <= 64;
    for (char c : *v) ok = ok && name_char(c);
    if (ok) return v;
    r.error(field, "bad name '" + *v + "' (1 to 64 letters, digits, '-', '_' or '.')");
    return std::nullopt;
}

std::optional<Parsed<Group>> parse_group(Reader& r, const Field& item) {
    Parsed<Group> p(item);
    Group& g = p.value;
    bool ok = r.read_map(item, {"name", "weight", "reserve", "limit", "latency_target"}, [&](const Field& f) {
        p.at[f.key] = f.at;
        if (parse_qos_key(r, f, p)) return;
        if (f.key == "name") {
            if (auto v = read_name(r, f)) g.name = *v;
        } else if (f.value.IsScalar() && f.value.Scalar() == "from-cgroup") {
            g.weight_from_cgroup = true;
        } else if (f.value.IsScalar() && !f.value.Scalar().empty() && f.value.Scalar()[0] >= '0' &&
                   f.value.Scalar()[0] <= '9') {
            if (auto v = r.integer(f, sched::min_weight, sched::max_weight)) g.weight = static_cast<unsigned>(*v);
        } else {
            r.error(f, "expected a weight 1..1000 or from-cgroup, got " + describe(f.value));
        }
    });
    if (!ok) return std::nullopt;
    check_qos(r, p);
    return named(r, item, p, "group");
}

std::optional<Parsed<Rule>> parse_rule(Reader& r, const Field& item) {
    Parsed<Rule> p(item);
    bool has_match = false;
    bool ok = r.read_map(item, {"match", "group"}, [&](const Field& f) {
        p.at[f.key] = f.at;
        if (f.key == "match") {
            has_match = true;
            parse_match(r, f, p);
        } else if (auto v = read_name(r, f)) {
            p.value.group = *v;
        }
    });
    if (!ok) return std::nullopt;
    if (!has_match)
        r.error(item.at, p.key("match"), "missing: a rule needs match: {...} (match: {} matches every client)");
    if (p.at.count("group") == 0) {
        r.error(item.at, p.key("group"), "missing: a rule needs the group its clients go to");
        return std::nullopt;
    }
    if (p.value.group.empty()) return std::nullopt;
    return p;
}

}   // namespace nbdsched::config::detail
