// The pieces of the loader: one parser per section, then the cross-section
// checks. Internal to config/ (the public interface is config.hpp).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.hpp"
#include "config/reader.hpp"

namespace nbdsched::config::detail {

// A parsed entry with where each of its keys was, so checks that need the
// whole file (an export's window against its device) can point at the key.
template <class T>
struct Parsed {
    Parsed() = default;
    explicit Parsed(const Field& item) : path(item.path) { value.origin = item.at; }

    T value;
    std::string path;                                // "exports[1]"
    std::map<std::string, Origin, std::less<>> at;   // key -> position of its value

    Origin where(std::string_view key) const {
        auto it = at.find(key);
        return it == at.end() ? value.origin : it->second;
    }
    std::string key(std::string_view name) const { return path + "." + std::string(name); }
};

// The entry if it has a usable name; "missing: every device needs a name"
// otherwise (an entry without a name cannot be referred to or checked further).
template <class T>
std::optional<Parsed<T>> named(Reader& r, const Field& item, Parsed<T>& p, std::string_view what) {
    if (p.at.count("name") == 0) {
        r.error(item.at, p.key("name"), "missing: every " + std::string(what) + " needs a name");
        return std::nullopt;
    }
    if (p.value.name.empty()) return std::nullopt;   // a bad name, already reported
    return std::move(p);
}

// A name of devices and groups: letters, digits, '-', '_', '.'; 1..64 chars.
// They appear in ctl commands and metric labels, hence the restriction.
std::optional<std::string> read_name(Reader& r, const Field& field);

// Who a peer is, as rules: and allow: match it (parse_peer.cpp).
// A cgroup v2 path: starts with '/'.
std::optional<std::string> read_cgroup(Reader& r, const Field& field);
// "10.0.0.1", "10.0.0.0/8", "::1", "fd00::/8".
std::optional<std::string> read_address(Reader& r, const Field& field);
// A uid or gid; (uid_t)-1 is "no id" to the kernel, so it is refused.
std::optional<std::uint32_t> read_id(Reader& r, const Field& field);
// A user (or group) name from the passwd (group) database, or a numeric id.
std::optional<std::uint32_t> read_account(Reader& r, const Field& field, bool group);
// A file mode in octal: "0660", "660"; permission bits only.
std::optional<std::uint32_t> read_mode(Reader& r, const Field& field);
// exports[].allow: a list of one-key rules.
std::vector<AllowRule> parse_allow(Reader& r, const Field& field);

// listen: [{unix: PATH} | {tcp: HOST:PORT}]
std::vector<Listen> parse_listen(Reader& r, const Field& field);
// "127.0.0.1:10809", "[::1]:10809", "localhost:10809" -> host (no brackets), port.
struct HostPort {
    std::string host;
    std::uint16_t port = 0;
};
std::optional<HostPort> parse_host_port(std::string_view text, std::string& error);
// A Unix socket path: non-empty and short enough for sockaddr_un.
bool check_socket_path(std::string_view path, std::string& error);
// control: must not be the path of a unix listener (both would bind it).
void check_control_apart(Reader& r, const Config& config, const Origin& control_at);

std::optional<Parsed<Device>> parse_device(Reader& r, const Field& item);
std::optional<Parsed<Export>> parse_export(Reader& r, const Field& item);
std::optional<Parsed<Group>> parse_group(Reader& r, const Field& item);
std::optional<Parsed<Rule>> parse_rule(Reader& r, const Field& item);
// groups[].reserve/limit/latency_target into p.value.qos; false: not one of them.
bool parse_qos_key(Reader& r, const Field& f, Parsed<Group>& p);
// Settings that contradict each other (a limit below the reservation).
void check_qos(Reader& r, const Parsed<Group>& p);

// Device details checked once the whole entry is read (keys come in any order).
void check_scheduler(Reader& r, const std::string& path, Device& device, const std::optional<Field>& scheduler,
                     const std::vector<Field>& tunables);
void check_profile(Reader& r, Device& device, const std::optional<Field>& profile,
                   const std::vector<Field>& param_blocks);
// Two file devices over one file or block device, or over a partition and
// its whole disk (device_checks.cpp).
void check_shared_storage(Reader& r, const std::vector<Parsed<Device>>& devices);
// The whole disk a partition is on, as "major:minor", from sysfs: the
// partition's directory (/sys/dev/block/MAJ:MIN links to it) has a
// `partition` file and sits in its disk's, whose `dev` names the disk.
// nullopt for a whole disk, or when sysfs does not say.
std::optional<std::string> whole_disk_of(const std::string& dev, const std::filesystem::path& sysfs = "/sys");
// What two devices must not share: clash(later, first) for each device whose
// identity(device) an earlier device has (an empty identity is not compared).
void for_each_shared(const std::vector<Parsed<Device>>& devices,
                     const std::function<std::string(const Device&)>& identity,
                     const std::function<void(const Parsed<Device>&, const Parsed<Device>&)>& clash);
// A path in one spelling (./a and a are one), as written where it cannot be resolved.
std::string normal_path(const std::string& path);

// backend: rbd's keys (parse_rbd.cpp): each read alone, then checked together.
inline constexpr const char* rbd_keys[] = {"pool", "image", "namespace", "ceph_conf", "client",
                                           "osd_op_timeout", "mount_timeout", "rbd_cache"};
bool is_rbd_key(std::string_view key);
void read_rbd_key(Reader& r, const Field& field, backend::RbdSpec& rbd);
void check_rbd(Reader& r, Parsed<Device>& p, const Origin& required_by);
// Two rbd devices on one image (the same ceph_conf, pool, namespace, image).
void check_shared_images(Reader& r, const std::vector<Parsed<Device>>& devices);

void parse_limits(Reader& r, const Field& field, Limits& limits);
void parse_tls(Reader& r, const Field& field, Tls& tls);
void check_listen_tls(Reader& r, const Config& config);
// devices[].faults; device_size 0 = not known (a file's existing size).
std::vector<FaultRule> parse_faults(Reader& r, const Field& field, std::uint64_t device_size);

struct Sections {
    std::vector<Parsed<Device>> devices;
    std::vector<Parsed<Export>> exports;
    std::vector<Parsed<Group>> groups;
    std::vector<Parsed<Rule>> rules;
};
// Names unique, references resolved, windows inside their devices, no two
// file devices over one file or block device, no two rbd devices on one
// image; adds the implicit "default" group. Moves the entries into `config`.
void resolve(Reader& r, Sections& sections, Config& config);

}   // namespace nbdsched::config::detail
