// The daemon's configuration as loaded from YAML (or the embedded default).
// Loading validates everything; a Config that exists is internally consistent.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend/spec.hpp"
#include "common/fault_rule.hpp"
#include "common/units.hpp"
#include "sched/qos/spec.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::config {

// Where a value came from, for error messages about semantics found later
// (e.g. an export window outside its device): "file.yaml:12:5".
struct Origin {
    std::string file;
    int line = 0;     // 1-based; 0 = unknown (embedded default, CLI)
    int column = 0;   // 1-based
    std::string str() const;
};

struct Listen {
    enum class Kind { unix_socket,
                      tcp } kind = Kind::unix_socket;
    std::string path;   // unix
    std::string host;   // tcp, e.g. "127.0.0.1" or "::1"
    std::uint16_t port = 10809;
    // nbdkit's --tls: off = STARTTLS refused; on = offered; require = nothing
    // but STARTTLS and ABORT before TLS is up.
    enum class Tls { off,
                     on,
                     require } tls = Tls::off;
    bool insecure = false;   // allows a non-loopback TCP listener without tls: require
    // unix: the socket file's permissions and owner; unset: as bind() leaves
    // them (docs/access-control.md#socket-permissions).
    std::optional<std::uint32_t> mode;    // e.g. 0660
    std::optional<std::uint32_t> owner;   // uid (a name is resolved at load)
    std::optional<std::uint32_t> group;   // gid
    Origin origin;
};

// tls: the server's credentials; files are read (and checked) at start.
struct Tls {
    std::string psk_file;          // psktool format: identity:hexkey lines
    std::string certificates;      // dir with ca-cert.pem, server-cert.pem, server-key.pem
    bool verify_clients = false;   // client certificates must chain to ca-cert.pem
    Origin origin;
    Origin psk_file_origin, certificates_origin;   // each key's value, for errors about its file
    bool enabled() const { return !psk_file.empty() || !certificates.empty(); }
};

using BackendKind = backend::Kind;
enum class Tristate { automatic,
                      yes,
                      no };

struct Device {
    std::string name;
    BackendKind backend = BackendKind::ram;
    std::uint64_t size = 0;                                       // bytes; file: 0 = use the existing file's size
    std::string path;                                             // file only
    bool direct = false;                                          // O_DIRECT
    bool huge_pages = true;                                       // ram only: THP-backed pages
    backend::IoEngine io_engine = backend::IoEngine::automatic;   // file only: threads | io_uring
    bool io_cohorts = true;                                       // file on io_uring: auto (true) | off
    Tristate rotational = Tristate::automatic;
    std::string scheduler = "none";                      // none | cfq | bfq
    sched::Tunables tunables;                            // validated against the policy
    std::string profile = "none";                        // none | hdd | ssd | nvme
    std::map<std::string, std::string> profile_params;   // overrides, e.g. rpm: "7200"
    std::optional<std::uint64_t> read_ahead_kb;          // nullopt = auto
    std::uint64_t read_ahead_cache = 64ull << 20;        // bytes
    bool writes_sync = true;                             // plain writes are sync, so weights hold (docs/writes.md)
    unsigned queue_depth = 0;                            // 0 = from the profile (none: 64)
    std::string default_group = "default";
    std::vector<FaultRule> faults;   // fault injection (testing); empty = none
    backend::RbdSpec rbd;            // backend: rbd (pool, image, ...); break_lock from --break-lock
    Origin origin;

    // What backend/ builds the device's storage from.
    backend::Spec backend_spec() const;
};

// One entry of an export's allow: list; exactly one field is set. user: and
// group: names are resolved to ids when the config loads.
struct AllowRule {
    std::optional<std::uint32_t> uid;
    std::optional<std::uint32_t> gid;          // the peer's primary or a supplementary group
    std::optional<std::string> cgroup;         // the peer's cgroup or one below it
    std::optional<std::string> address;        // TCP peer: an address or CIDR block
    std::optional<std::string> tls_identity;   // PSK identity or certificate CN
    std::string text;                          // as written ("user: alice"), for logs
    Origin origin;

    bool same_as(const AllowRule& o) const {
        return uid == o.uid && gid == o.gid && cgroup == o.cgroup && address == o.address &&
               tls_identity == o.tls_identity;
    }
};

struct Export {
    std::string name;
    std::string device;
    std::uint64_t offset = 0;
    std::optional<std::uint64_t> size;   // nullopt = rest of the device
    bool readonly = false;
    std::string description;
    std::string group;              // empty = the device's default group
    std::vector<AllowRule> allow;   // any one admits; empty = everyone who reaches the socket
    Origin origin;
};

struct Group {
    std::string name;
    unsigned weight = 100;             // 1..1000
    bool weight_from_cgroup = false;   // weight: from-cgroup
    sched::qos::GroupQos qos;          // reserve, limit, latency_target (docs/qos.md)
    Origin origin;
};

// Classification rule: first match wins; unset fields match anything.
struct Rule {
    std::optional<std::string> cgroup;   // prefix of the peer's cgroup path (unix sockets)
    std::optional<std::uint32_t> uid;
    std::optional<std::uint32_t> gid;
    std::optional<std::string> address;   // TCP peer address (exact or CIDR)
    std::optional<std::string> export_name;
    std::string group;
    Origin origin;
};

// What an event loop does with time before it sleeps (limits.busy_poll,
// limits.coalesce): `0` (nothing), a fixed window, or `auto`: the window,
// only while it pays.
struct LoopWindow {
    std::chrono::microseconds window{0};   // 0: never
    bool adaptive = false;                 // `auto`
    bool operator==(const LoopWindow&) const = default;
};

struct Limits {
    unsigned max_connections = 1024;
    // Connections still in the handshake; at the bound a new one closes the
    // oldest handshake of the peer holding the most (daemon/process/handshake_room.hpp).
    unsigned max_handshakes = 128;
    unsigned max_inflight_per_connection = 256;   // requests read but not yet answered
    std::uint64_t max_inflight_bytes_per_connection = 64ull << 20;
    std::uint32_t max_request_bytes = 32u << 20;   // NBD_INFO_BLOCK_SIZE max payload
    // Across all connections of one device: requests read but not yet answered.
    unsigned max_inflight_per_device = 4096;
    std::uint64_t max_inflight_bytes_per_device = 1ull << 30;
    // Share those requests by weight across the groups using the device
    // (daemon/device/inflight_budget.hpp); false: first come, first served.
    bool inflight_fair_share = true;
    // Threads that run blocking (file) backends' I/O; RAM runs on the event loop.
    unsigned io_threads = 16;
    // A client still negotiating (including its TLS handshake) after this
    // long, or after this many options, is dropped.
    std::chrono::milliseconds handshake_timeout{10000};
    unsigned max_handshake_options = 1024;
    // How long a shutdown or a planned restart waits for each thing that may
    // not end (connections answering what they read, the final flush, the
    // I/O pool at exit, a hand-over's parking and its flush) before giving up
    // on it (daemon/process/storage_waits.hpp).
    std::chrono::milliseconds drain_timeout{10000};
    // A connection in transmission that has not sent the rest of a request
    // it began (its header, a WRITE payload), or not read its replies, for
    // this long is closed; 0 = never.
    // Applied live by a reload (daemon/session/connection_stall.cpp).
    std::chrono::milliseconds stall_timeout{0};
    // How long the event loop polls for more work before it sleeps in
    // epoll_wait (docs/data-path.md#busy-poll). `auto` by default, as
    // qemu's IOThreads poll adaptively by default; its window: a 4 KiB
    // request's round trip through a client on another core takes 20-45 us here.
    static constexpr LoopWindow busy_poll_auto{std::chrono::microseconds(50), true};
    LoopWindow busy_poll = busy_poll_auto;
    // How long a loop that runs out of work naps before it waits for more,
    // so that what arrives meanwhile is read, served and answered in one
    // batch: fewer wake-ups and system calls per request on both sides, at
    // the price of up to the nap in latency (docs/data-path.md#coalescing).
    // `auto`'s nap: at 4 KiB requests from a client streaming them
    // (iodepth 8 and more) 3-7 requests come in 50 us here.
    static constexpr LoopWindow coalesce_auto{std::chrono::microseconds(50), true};
    LoopWindow coalesce = coalesce_auto;
    // Event loops (threads) serving devices and their connections
    // (docs/threads.md); 0 = one per CPU.
    unsigned threads = 0;
    // A device's connections after its first go to the loop serving the
    // fewest connections (the device is then shared under a lock); false:
    // every connection on its device's loop.
    bool spread_connections = true;

    // Field by field: a reload refuses any change but the live ones
    // (daemon/process/reload_plan.cpp), a field added here included.
    bool operator==(const Limits&) const = default;
};

struct Config {
    std::string source;   // file path, or "<embedded default>"
    std::vector<Listen> listen;
    std::vector<Device> devices;
    std::vector<Export> exports;
    std::vector<Group> groups;   // "default" (weight 100) always exists
    std::vector<Rule> rules;
    std::string control;              // control socket path; empty = none
    std::string metrics;              // host:port of the Prometheus endpoint; empty = off
    std::string log_level = "info";   // trace|debug|info|warn|error
    Limits limits;
    Tls tls;

    const Device* find_device(std::string_view name) const;
    const Export* find_export(std::string_view name) const;
    const Group* find_group(std::string_view name) const;
};

// A configuration error: "file.yaml:12:5: devices[0].size: bad size 'abc'".
struct Error {
    Origin origin;
    std::string key;   // dotted path of the offending key, e.g. "devices[0].size"
    std::string message;
    std::string str() const;
};

struct LoadResult {
    std::optional<Config> config;   // set when errors is empty
    std::vector<Error> errors;      // every problem found, in file order
};

LoadResult load_file(const std::string& path);
LoadResult load_string(const std::string& yaml, const std::string& name = "<string>");

// One 1 GiB RAM device "d0" (scheduler none) served as the export "default",
// listening on default_listen().
Config embedded_default();

// Where the daemon listens when the config has no `listen:` key: the unix
// socket $XDG_RUNTIME_DIR/nbdsched/nbdsched.sock (else /run/nbdsched/nbdsched.sock
// as root, else /tmp/nbdsched-UID/nbdsched.sock) plus tcp 127.0.0.1:10809.
std::vector<Listen> default_listen();
// Why default_listen()'s unix socket cannot be bound (a path, e.g. from a
// long $XDG_RUNTIME_DIR, too long for sockaddr_un); nullopt when it can.
std::optional<std::string> default_listen_problem();

// HOST:PORT exactly as the `tcp:` listen key and `metrics:` take it (IPv6 in
// brackets, port 1..65535), for --listen-tcp: nullopt and `error` on garbage.
std::optional<Listen> parse_tcp_listen(std::string_view text, std::string& error);
// A socket path exactly as the `unix:` listen key takes it, for --listen-unix.
std::optional<Listen> parse_unix_listen(std::string_view path, std::string& error);
// One socket file written two ways ("/run/x//a.sock", "/run/x/./a.sock").
bool same_socket_path(const std::string& a, const std::string& b);
// Two listeners that cannot both bind: one socket file however it is written,
// one port on one address ("localhost" is 127.0.0.1), or on a wildcard
// address (0.0.0.0, [::]) that covers the other's.
bool same_endpoint(const Listen& a, const Listen& b);
// A TCP listener beyond loopback without tls: require and without
// insecure: true; the reason, or nullopt when it may start.
std::optional<std::string> insecure_listener(const Listen& listen);
bool is_loopback(const Listen& listen);

}   // namespace nbdsched::config
