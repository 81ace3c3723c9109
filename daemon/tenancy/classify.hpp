// Which group a client's connection belongs to: the first classification
// rule (config `rules:`) that matches the peer and the export, else the
// export's group, else the device's default group. The peer is taken at
// accept time: over a unix socket its pid/uid/gid (SO_PEERCRED) and the
// cgroup v2 path of that pid (/proc/PID/cgroup); over TCP its address.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"

namespace nbdsched::daemon {

struct PeerInfo {
    bool is_unix = false;
    std::optional<std::int32_t> pid;
    std::optional<std::uint32_t> uid;
    std::optional<std::uint32_t> gid;
    std::vector<std::uint32_t> groups;   // supplementary groups (SO_PEERGROUPS)
    std::string cgroup;                  // "/system.slice/x.service"; empty = unknown
    std::string address;                 // TCP: "127.0.0.1" or "::1" (no port)
    // The PSK identity or client certificate CN once TLS is up; unset
    // without TLS. Set by the session after the TLS handshake.
    std::optional<std::string> tls_identity;

    // "unix pid 12 uid 0 gid 0 cgroup /a/b" or "tcp 127.0.0.1", plus
    // " tls alice" with a TLS identity, for logs and ctl; bytes that are not
    // UTF-8 and control characters in those two as "\xNN" (printable()).
    std::string describe() const;
};

// Reads SO_PEERCRED, SO_PEERGROUPS and /proc/PID/cgroup (unix) or getpeername (TCP) of a
// connected socket. Never fails: unknown fields stay empty.
PeerInfo peer_info(int fd, const std::string& proc_root = "/proc");

// The cgroup v2 path from the text of /proc/PID/cgroup (the "0::" line).
std::optional<std::string> parse_proc_cgroup(std::string_view text);

// The peer's primary gid or one of its supplementary groups is `gid`, as
// the kernel checks file access (rules: and allow: alike).
bool in_group(const PeerInfo& peer, std::uint32_t gid);

// A rule's cgroup matches the peer's cgroup and everything below it.
bool cgroup_matches(std::string_view prefix, std::string_view path);

// An address rule: exact ("10.0.0.1", "::1") or CIDR ("10.0.0.0/8",
// "fd00::/8"). An IPv4-mapped IPv6 peer (::ffff:10.0.0.1) matches IPv4 rules.
bool address_matches(std::string_view rule, std::string_view address);

// The first rule matching the peer on the export, or nullptr.
const config::Rule* match_rule(const std::vector<config::Rule>& rules, const PeerInfo& peer,
                               std::string_view export_name);

// `weight: from-cgroup`: io.bfq.weight, else io.weight, of the cgroup
// (files hold "default N" or "N"; both default to 100); io.weight's range
// 1..10000 is clamped to the schedulers' 1..1000.
// cgroup_root empty: where the v2 hierarchy is mounted (cgroup2_root()).
std::optional<unsigned> cgroup_weight(const std::string& cgroup, const std::string& cgroup_root = "");
// /sys/fs/cgroup on a unified system, /sys/fs/cgroup/unified on a hybrid one.
std::string cgroup2_root();
// The parsing half, for tests: the weight in one of those files.
std::optional<unsigned> parse_cgroup_weight(std::string_view text);

}   // namespace nbdsched::daemon
