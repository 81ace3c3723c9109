// devices[]: one scheduling domain over one backend.
#include "backend/ram_backend.hpp"
#include "config/parsers.hpp"

#include <sys/stat.h>

namespace nbdsched::config::detail {
namespace {

// Read-ahead beyond 1 GiB per stream is a configuration mistake, not a tuning.
constexpr std::uint64_t max_read_ahead_kb = 1u << 20;
constexpr std::uint64_t max_queue_depth = 4096;

std::optional<Tristate> read_tristate(Reader& r, const Field& f) {
    if (f.value.IsScalar() && f.value.Scalar() == "auto") return Tristate::automatic;
    bool value = false;
    if (f.value.IsScalar() && YAML::convert<bool>::decode(f.value, value))
        return value ? Tristate::yes : Tristate::no;
    r.error(f, "expected auto, true or false, got " + describe(f.value));
    return std::nullopt;
}

std::optional<std::optional<std::uint64_t>> read_read_ahead(Reader& r, const Field& f) {
    if (f.value.IsScalar() && f.value.Scalar() == "auto") return std::optional<std::uint64_t>{};
    if (!f.value.IsScalar()) {
        r.error(f, "expected auto or a number of KiB, got " + describe(f.value));
        return std::nullopt;
    }
    if (auto kb = r.integer(f, 0, max_read_ahead_kb)) return std::optional<std::uint64_t>{*kb};
    return std::nullopt;
}

// O_DIRECT transfers whole blocks, so the start refuses a size that is not
// a multiple of them (backend/file_backend.hpp): 4096 on a file, the
// logical block size (512 or 4096) on a block device, which only the start
// reads; here a block device is held to 512 only.
void check_direct_size(Reader& r, Parsed<Device>& p) {
    const Device& d = p.value;
    struct stat st {};
    const bool block_device = ::stat(d.path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
    const std::uint64_t block = block_device ? 512 : 4096;
    if (d.size % block != 0)
        r.error(p.where("size"), p.key("size"),
                "size " + std::to_string(d.size) + " is not a multiple of " + std::to_string(block) +
                    " as O_DIRECT (direct: true) needs on " + (block_device ? "a block device" : "a file"));
}

// The checks that depend on more than one key of the entry.
void check_backend(Reader& r, Parsed<Device>& p, const Field& item, bool size_parsed) {
    Device& d = p.value;
    bool has_size = p.at.count("size") != 0;
    // A key the backend requires has no position of its own: point at the
    // backend that requires it, or at the entry when the backend is implied.
    Origin required_by = p.at.count("backend") ? p.where("backend") : item.at;
    if (d.backend == BackendKind::rbd) return check_rbd(r, p, required_by);
    for (const char* key : rbd_keys)
        if (p.at.count(key)) r.error(p.where(key), p.key(key), "only for backend: rbd");
    if (d.backend == BackendKind::ram) {
        if (!has_size)
            r.error(required_by, p.key("size"), "missing: a ram device needs a size (e.g. size: 1GiB)");
        else if (d.size == 0 && size_parsed)
            r.error(p.where("size"), p.key("size"), "a ram device needs a size above 0");
        else if (d.size > backend::RamBackend::max_size)   // what the start would refuse
            r.error(p.where("size"), p.key("size"),
                    "a ram device is at most " + format_size(backend::RamBackend::max_size) + ", got " +
                        format_size(d.size));
        if (p.at.count("path"))
            r.error(p.where("path"), p.key("path"), "only for backend: file");
        if (d.direct)
            r.error(p.where("direct"), p.key("direct"), "only for backend: file (O_DIRECT)");
        for (const char* key : {"io_engine", "io_cohorts"})
            if (p.at.count(key)) r.error(p.where(key), p.key(key), "only for backend: file");
        return;
    }
    if (p.at.count("huge_pages"))
        r.error(p.where("huge_pages"), p.key("huge_pages"), "only for backend: ram");
    if (p.at.count("path") == 0)
        r.error(required_by, p.key("path"), "missing: a file device needs a path (a file or a block device)");
    else if (d.direct && size_parsed && d.size != 0)
        check_direct_size(r, p);
}

}   // namespace

std::optional<Parsed<Device>> parse_device(Reader& r, const Field& item) {
    Parsed<Device> p(item);
    Device& d = p.value;
    std::optional<Field> scheduler, profile, faults;
    std::vector<Field> tunables, param_blocks;
    bool size_parsed = false;
    bool ok = r.read_map(item,
                         {"name", "backend", "size", "path", "direct", "huge_pages", "io_engine", "io_cohorts", "rotational", "scheduler", "tunables", "profile",
                          "hdd", "ssd", "nvme", "read_ahead_kb", "read_ahead_cache", "writes_sync", "queue_depth",
                          "default_group", "faults", "pool", "image", "namespace", "ceph_conf", "client",
                          "osd_op_timeout", "mount_timeout", "rbd_cache"},
                         [&](const Field& f) {
                             p.at[f.key] = f.at;
                             const std::string& k = f.key;
                             if (k == "name") {
                                 if (auto v = read_name(r, f)) d.name = *v;
                             } else if (k == "backend") {
                                 if (auto v = r.choice(f, {"ram", "file", "rbd"}))
                                     d.backend = *v == "ram" ? BackendKind::ram : *v == "file" ? BackendKind::file
                                                                                               : BackendKind::rbd;
                             } else if (k == "size") {
                                 if (auto v = r.size(f)) {
                                     d.size = *v;
                                     size_parsed = true;
                                 }
                             } else if (k == "path") {
                                 if (auto v = r.string(f)) {
                                     if (v->empty()) r.error(f, "empty path");
                                     d.path = *v;
                                 }
                             } else if (k == "direct") {
                                 if (auto v = r.boolean(f)) d.direct = *v;
                             } else if (k == "huge_pages") {
                                 if (auto v = r.boolean(f)) d.huge_pages = *v;
                             } else if (k == "io_engine") {
                                 if (auto v = r.choice(f, {"auto", "threads", "io_uring"}))
                                     d.io_engine = *v == "threads"    ? backend::IoEngine::threads
                                                   : *v == "io_uring" ? backend::IoEngine::io_uring
                                                                      : backend::IoEngine::automatic;
                             } else if (k == "io_cohorts") {
                                 if (auto v = r.choice(f, {"auto", "off"})) d.io_cohorts = *v == "auto";
                             } else if (k == "rotational") {
                                 if (auto v = read_tristate(r, f)) d.rotational = *v;
                             } else if (k == "scheduler") {
                                 scheduler = f;
                             } else if (k == "tunables") {
                                 r.read_any_map(f, [&](const Field& t) { tunables.push_back(t); });
                             } else if (k == "profile") {
                                 profile = f;
                             } else if (k == "hdd" || k == "ssd" || k == "nvme") {
                                 param_blocks.push_back(f);
                             } else if (k == "read_ahead_kb") {
                                 if (auto v = read_read_ahead(r, f)) d.read_ahead_kb = *v;
                             } else if (k == "read_ahead_cache") {
                                 if (auto v = r.size(f)) d.read_ahead_cache = *v;
                             } else if (k == "writes_sync") {
                                 if (auto v = r.boolean(f)) d.writes_sync = *v;
                             } else if (k == "queue_depth") {
                                 if (auto v = r.integer(f, 0, max_queue_depth)) d.queue_depth = static_cast<unsigned>(*v);
                             } else if (k == "default_group") {
                                 if (auto v = read_name(r, f)) d.default_group = *v;
                             } else if (is_rbd_key(k)) {
                                 read_rbd_key(r, f, d.rbd);
                             } else if (k == "faults") {
                                 faults = f;   // after the loop: a range is checked against the size
                             }
                         });
    if (!ok) return std::nullopt;
    check_backend(r, p, item, size_parsed);
    check_scheduler(r, p.path, d, scheduler, tunables);
    check_profile(r, d, profile, param_blocks);
    if (faults) d.faults = parse_faults(r, *faults, d.size);
    return named(r, item, p, "device");
}

}   // namespace nbdsched::config::detail
