// Who a client is, as classification rules (rules[].match) and access rules
// (exports[].allow) name it, and the unix socket's mode and owner.
#include <arpa/inet.h>
#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <charconv>
#include <limits>

#include "config/parsers.hpp"

namespace nbdsched::config::detail {
namespace {

bool valid_address(const std::string& text) {
    auto slash = text.find('/');
    std::string addr = text.substr(0, slash);
    unsigned char buf[sizeof(in6_addr)];
    unsigned max_prefix = 0;
    if (inet_pton(AF_INET, addr.c_str(), buf) == 1) max_prefix = 32;
    else if (inet_pton(AF_INET6, addr.c_str(), buf) == 1) max_prefix = 128;
    else return false;
    if (slash == std::string::npos) return true;
    std::string_view prefix = std::string_view(text).substr(slash + 1);
    unsigned bits = 0;
    auto [ptr, ec] = std::from_chars(prefix.data(), prefix.data() + prefix.size(), bits);
    return !prefix.empty() && ec == std::errc() && ptr == prefix.data() + prefix.size() && bits <= max_prefix;
}

bool all_digits(const std::string& s) {
    return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

// getpwnam_r/getgrnam_r: the passwd and group databases through NSS.
std::optional<std::uint32_t> lookup(const std::string& name, bool group) {
    std::vector<char> buf(16384);
    if (group) {
        struct group g {};
        struct group* out = nullptr;
        if (::getgrnam_r(name.c_str(), &g, buf.data(), buf.size(), &out) == 0 && out) return out->gr_gid;
    } else {
        struct passwd p {};
        struct passwd* out = nullptr;
        if (::getpwnam_r(name.c_str(), &p, buf.data(), buf.size(), &out) == 0 && out) return out->pw_uid;
    }
    return std::nullopt;
}

void parse_allow_rule(Reader& r, const Field& item, std::vector<AllowRule>& out) {
    AllowRule rule;
    rule.origin = item.at;
    int keys = 0;
    bool good = true;
    bool ok = r.read_map(item, {"uid", "gid", "user", "group", "cgroup", "address", "tls_identity"}, [&](const Field& f) {
        if (++keys > 1) return r.error(f, "one key per rule (each rule admits on its own; list them separately)");
        rule.text = f.key + ": " + (f.value.IsScalar() ? f.value.Scalar() : describe(f.value));
        const std::string& k = f.key;
        if (k == "uid") rule.uid = read_id(r, f);
        else if (k == "gid") rule.gid = read_id(r, f);
        else if (k == "user") rule.uid = read_account(r, f, false);
        else if (k == "group") rule.gid = read_account(r, f, true);
        else if (k == "cgroup") rule.cgroup = read_cgroup(r, f);
        else if (k == "address") rule.address = read_address(r, f);
        else if (auto v = r.string(f); v && v->empty()) r.error(f, "empty TLS identity");
        else rule.tls_identity = v;
        good = good && (rule.uid || rule.gid || rule.cgroup || rule.address || rule.tls_identity);
    });
    if (!ok) return;
    if (item.value.size() == 0) {   // an unknown key is reported already
        r.error(item, "empty rule: give one of uid, gid, user, group, cgroup, address, tls_identity");
        return;
    }
    if (keys == 1 && good) out.push_back(std::move(rule));
}

}   // namespace

std::optional<std::string> read_cgroup(Reader& r, const Field& field) {
    auto v = r.string(field);
    if (v && (v->empty() || v->front() != '/')) {
        r.error(field, "a cgroup path starts with '/', as in /proc/PID/cgroup (e.g. /tenants.slice/a.scope)");
        return std::nullopt;
    }
    if (!v) return v;
    // Matched component by component against the kernel's path, which
    // never has these: such a rule would never match (trailing '/' is fine).
    std::string_view rest(*v);
    while (rest.size() > 1 && rest.back() == '/') rest.remove_suffix(1);
    for (std::size_t at = 1; rest.size() > 1 && at <= rest.size();) {
        const auto end = std::min(rest.find('/', at), rest.size());
        const auto part = rest.substr(at, end - at);
        if (part.empty() || part == "." || part == "..") {
            r.error(field, "'" + *v + "' has an empty, '.' or '..' component: a cgroup path as /proc/PID/cgroup "
                                      "shows it never does, so it would never match");
            return std::nullopt;
        }
        at = end + 1;
    }
    return v;
}

std::optional<std::string> read_address(Reader& r, const Field& field) {
    auto v = r.string(field);
    if (v && !valid_address(*v)) {
        r.error(field, "expected an IP address or CIDR block (e.g. 10.0.0.0/8, ::1), got '" + *v + "'");
        return std::nullopt;
    }
    return v;
}

std::optional<std::uint32_t> read_id(Reader& r, const Field& field) {
    constexpr std::uint64_t max_id = std::numeric_limits<std::uint32_t>::max() - 1;
    auto v = r.integer(field, 0, max_id);
    if (!v) return std::nullopt;
    return static_cast<std::uint32_t>(*v);
}

std::optional<std::uint32_t> read_account(Reader& r, const Field& field, bool group) {
    auto v = r.string(field);
    if (!v) return std::nullopt;
    if (all_digits(*v)) return read_id(r, field);
    if (auto id = lookup(*v, group)) return id;
    r.error(field, std::string("unknown ") + (group ? "group '" : "user '") + *v + "' (not in the " +
                       (group ? "group" : "passwd") + " database)");
    return std::nullopt;
}

std::optional<std::uint32_t> read_mode(Reader& r, const Field& field) {
    auto v = r.string(field);
    if (!v) return std::nullopt;
    unsigned mode = 0;
    auto [ptr, ec] = std::from_chars(v->data(), v->data() + v->size(), mode, 8);
    if (v->size() < 3 || v->size() > 4 || ec != std::errc() || ptr != v->data() + v->size() || mode > 0777) {
        r.error(field, "expected an octal mode from \"000\" to \"0777\" (quoted, e.g. \"0660\"), got " +
                           describe(field.value));
        return std::nullopt;
    }
    return mode;
}

std::vector<AllowRule> parse_allow(Reader& r, const Field& field) {
    std::vector<AllowRule> out;
    r.read_list(field, [&](const Field& item, std::size_t) { parse_allow_rule(r, item, out); });
    if (field.value.IsSequence() && field.value.size() == 0)
        r.error(field, "empty: list at least one rule, or remove the key to admit everyone who reaches the socket");
    return out;
}

}   // namespace nbdsched::config::detail
