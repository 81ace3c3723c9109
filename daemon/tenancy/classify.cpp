#include "daemon/tenancy/classify.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <charconv>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/un.h>

#include "common/utf8.hpp"

namespace nbdsched::daemon {

namespace {

std::string read_file(const std::string& path) {
    std::ifstream in(path);
    if (!in) return {};
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

// An address as 16 bytes (IPv4 as IPv4-mapped IPv6) for prefix comparison.
std::optional<std::array<unsigned char, 16>> to_v6(std::string_view text, bool& was_v4) {
    std::string s(text);
    std::array<unsigned char, 16> out{};
    in_addr v4{};
    if (::inet_pton(AF_INET, s.c_str(), &v4) == 1) {
        out[10] = out[11] = 0xff;
        std::memcpy(out.data() + 12, &v4, 4);
        was_v4 = true;
        return out;
    }
    in6_addr v6{};
    if (::inet_pton(AF_INET6, s.c_str(), &v6) == 1) {
        std::memcpy(out.data(), &v6, 16);
        was_v4 = false;
        return out;
    }
    return std::nullopt;
}

bool match_one(const config::Rule& r, const PeerInfo& peer, std::string_view export_name) {
    if (r.export_name && *r.export_name != export_name) return false;
    if (r.cgroup && (peer.cgroup.empty() || !cgroup_matches(*r.cgroup, peer.cgroup))) return false;
    if (r.uid && peer.uid != r.uid) return false;
    if (r.gid && !in_group(peer, *r.gid)) return false;
    if (r.address && (peer.address.empty() || !address_matches(*r.address, peer.address))) return false;
    return true;
}

// The peer's supplementary groups as they were at connect() (Linux 4.13+);
// empty where the kernel cannot tell.
std::vector<std::uint32_t> peer_groups(int fd) {
    std::vector<gid_t> groups(64);
    for (int tries = 0; tries < 2; ++tries) {
        socklen_t len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
            groups.resize(len / sizeof(gid_t));
            return {groups.begin(), groups.end()};
        }
        if (errno != ERANGE) break;
        groups.resize(len / sizeof(gid_t) + 1);   // ERANGE reports the size it needs
    }
    return {};
}

}   // namespace

std::string PeerInfo::describe() const {
    std::string s = is_unix ? "unix" : address.empty() ? "tcp ?"
                                                       : "tcp " + address;
    if (pid) s += " pid " + std::to_string(*pid);
    if (uid) s += " uid " + std::to_string(*uid);
    if (gid) s += " gid " + std::to_string(*gid);
    // Both are any bytes a client picked (a delegated cgroup's name, a
    // PSK identity); the text goes to ctl, logs and metrics, which are UTF-8.
    if (!cgroup.empty()) s += " cgroup " + printable(cgroup);
    if (tls_identity) s += " tls " + printable(*tls_identity);
    return s;
}

PeerInfo peer_info(int fd, const std::string& proc_root) {
    PeerInfo p;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return p;
    if (addr.ss_family == AF_UNIX) {
        p.is_unix = true;
        ucred cred{};
        socklen_t clen = sizeof cred;
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen) != 0) return p;
        p.uid = cred.uid;
        p.gid = cred.gid;
        p.groups = peer_groups(fd);
        // A peer outside the daemon's pid namespace (a container, PrivatePIDs=) has pid 0 here:
        // its credentials still hold, only its cgroup cannot be looked up.
        if (cred.pid > 0) {
            p.pid = cred.pid;
            auto cg = parse_proc_cgroup(read_file(proc_root + "/" + std::to_string(cred.pid) + "/cgroup"));
            if (cg) p.cgroup = *cg;
        }
        return p;
    }
    len = sizeof addr;
    if (::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return p;
    char buf[INET6_ADDRSTRLEN] = {};
    if (addr.ss_family == AF_INET) {
        ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, buf, sizeof buf);
    } else if (addr.ss_family == AF_INET6) {
        ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, buf, sizeof buf);
    }
    p.address = buf;
    return p;
}

std::optional<std::string> parse_proc_cgroup(std::string_view text) {
    while (!text.empty()) {
        auto nl = text.find('\n');
        auto line = text.substr(0, nl);
        if (line.starts_with("0::")) return std::string(line.substr(3));
        if (nl == std::string_view::npos) break;
        text.remove_prefix(nl + 1);
    }
    return std::nullopt;
}

bool in_group(const PeerInfo& peer, std::uint32_t gid) {
    return peer.gid == gid || std::find(peer.groups.begin(), peer.groups.end(), gid) != peer.groups.end();
}

bool cgroup_matches(std::string_view prefix, std::string_view path) {
    while (prefix.size() > 1 && prefix.back() == '/') prefix.remove_suffix(1);
    if (prefix == "/" || prefix.empty()) return true;
    if (!path.starts_with(prefix)) return false;
    return path.size() == prefix.size() || path[prefix.size()] == '/';
}

bool address_matches(std::string_view rule, std::string_view address) {
    auto slash = rule.find('/');
    bool rule_v4 = false, peer_v4 = false;
    auto net = to_v6(rule.substr(0, slash), rule_v4);
    auto peer = to_v6(address, peer_v4);
    if (!net || !peer) return false;
    unsigned bits = 128;
    if (slash != std::string_view::npos) {
        auto text = rule.substr(slash + 1);
        unsigned n = 0;
        auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
        if (ec != std::errc() || end != text.data() + text.size() || n > (rule_v4 ? 32u : 128u)) return false;
        bits = rule_v4 ? 96 + n : n;
    }
    for (unsigned i = 0; i < bits; ++i) {
        unsigned byte = i / 8, mask = 0x80u >> (i % 8);
        if (((*net)[byte] & mask) != ((*peer)[byte] & mask)) return false;
    }
    return true;
}

const config::Rule* match_rule(const std::vector<config::Rule>& rules, const PeerInfo& peer,
                               std::string_view export_name) {
    for (const auto& r : rules)
        if (match_one(r, peer, export_name)) return &r;
    return nullptr;
}

std::optional<unsigned> parse_cgroup_weight(std::string_view text) {
    // "default 100\n8:0 200\n" or "100\n": the default weight is what we use.
    if (text.starts_with("default ")) text.remove_prefix(8);
    while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
    unsigned w = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), w);
    if (ec != std::errc() || w == 0) return std::nullopt;
    if (w > 1000) w = 1000;   // io.weight goes to 10000; both default to 100
    return w;
}

std::string cgroup2_root() {
    std::ifstream unified("/sys/fs/cgroup/cgroup.controllers");
    if (unified) return "/sys/fs/cgroup";
    std::ifstream hybrid("/sys/fs/cgroup/unified/cgroup.controllers");
    return hybrid ? "/sys/fs/cgroup/unified" : "/sys/fs/cgroup";
}

std::optional<unsigned> cgroup_weight(const std::string& cgroup, const std::string& cgroup_root) {
    std::string dir = (cgroup_root.empty() ? cgroup2_root() : cgroup_root) + cgroup;
    if (auto w = parse_cgroup_weight(read_file(dir + "/io.bfq.weight"))) return w;
    return parse_cgroup_weight(read_file(dir + "/io.weight"));
}

}   // namespace nbdsched::daemon
