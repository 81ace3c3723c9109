// A device's scheduler, tunables and timing profile, checked by the code that
// will run them (sched::make_scheduler, timing::check_profile) so the config
// and the daemon can never disagree about what is valid; and file devices
// that would share their storage (one file, one block device, or a
// partition and its disk).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "timing/profiles.hpp"
#include "config/parsers.hpp"
#include "config/suggest.hpp"
#include "sched/tunable_spec.hpp"

namespace nbdsched::config::detail {

void check_scheduler(Reader& r, const std::string& path, Device& device, const std::optional<Field>& scheduler,
                     const std::vector<Field>& tunables) {
    if (scheduler) {
        auto policy = r.choice(*scheduler, {"none", "cfq", "bfq"});
        if (!policy) return;
        device.scheduler = *policy;
    }
    // Build one with no device behind it: this is what reports a policy that
    // is known but not built into this binary.
    std::string error;
    auto instance = sched::make_scheduler(device.scheduler, sched::DeviceTraits{}, {}, error);
    if (!instance) {
        if (scheduler) r.error(*scheduler, error);
        else r.error(device.origin, path + ".scheduler", error);
        return;
    }
    // Names and values are checked against the policy's table, the one the
    // scheduler parses with; a device-dependent limit is applied at start-up.
    const auto specs = sched::tunable_specs(device.scheduler);
    const auto names = sched::tunable_names(specs);
    std::vector<std::string_view> views(names.begin(), names.end());
    for (const auto& t : tunables) {
        auto spec = std::find_if(specs.begin(), specs.end(), [&](const auto& s) { return s.name == t.key; });
        if (spec == specs.end()) {
            std::string hint = did_you_mean(t.key, views);
            if (hint.empty())
                hint = views.empty() ? " (it has none)" : " (it has: " + join(views) + ")";
            r.error(t.key_at, t.path, "not a tunable of scheduler " + device.scheduler + hint);
            continue;
        }
        auto value = r.string(t);
        if (!value) continue;
        auto parsed = sched::parse_tunable(*spec, *value, sched::DeviceTraits{});
        if (!parsed.error.empty()) {
            r.error(t, parsed.error);
            continue;
        }
        device.tunables[t.key] = *value;
    }
}

void check_profile(Reader& r, Device& device, const std::optional<Field>& profile,
                   const std::vector<Field>& param_blocks) {
    const std::vector<std::string_view> known{"none", "hdd", "ssd", "nvme"};
    if (profile) {
        auto name = r.string(*profile);
        if (!name) return;
        std::string error = timing::check_profile(*name, {});
        if (!error.empty()) return r.error(*profile, error + did_you_mean(*name, known));
        device.profile = *name;
    }
    for (const auto& block : param_blocks) {
        if (block.key != device.profile) {
            r.error(block.key_at, block.path,
                    "parameters for profile " + block.key + ", but this device's profile is " + device.profile);
            continue;
        }
        std::map<std::string, std::string> params;
        std::map<std::string, Field> fields;
        bool all_read = true;
        r.read_any_map(block, [&](const Field& p) {
            auto value = r.string(p);
            if (!value) return void(all_read = false);
            params[p.key] = *value;
            fields.emplace(p.key, p);
        });
        if (!all_read || params.empty()) continue;
        std::string error = timing::check_profile(device.profile, params);
        if (error.empty()) {
            device.profile_params = std::move(params);
            continue;
        }
        // The model reports only its first error. Check each parameter alone
        // to find every one that is wrong by itself ("hdd: rpm: ..." or an
        // unknown name) and point at its line; whatever is left is about how
        // the parameters combine, which belongs to the block.
        bool attributed = false;
        for (const auto& [key, field] : fields) {
            std::string alone = timing::check_profile(device.profile, {{key, params[key]}});
            std::string prefix = device.profile + ": " + key + ":";
            if (alone.find("unknown parameter") != std::string::npos) r.error(field.key_at, field.path, alone);
            else if (alone.rfind(prefix, 0) == 0) r.error(field, alone);
            else continue;
            attributed = true;
        }
        if (!attributed) r.error(block, error);
    }
}

std::string normal_path(const std::string& path) {
    // Absolute first: weakly_canonical leaves a relative path none of whose
    // parts exists as written ("ceph.conf") but resolves "./ceph.conf".
    std::error_code ec;
    const auto absolute = std::filesystem::absolute(path, ec);
    if (ec) return path;
    const auto normal = std::filesystem::weakly_canonical(absolute, ec);
    return ec ? path : normal.string();
}

void for_each_shared(const std::vector<Parsed<Device>>& devices,
                     const std::function<std::string(const Device&)>& identity,
                     const std::function<void(const Parsed<Device>&, const Parsed<Device>&)>& clash) {
    std::map<std::string, const Parsed<Device>*> seen;
    for (const auto& d : devices) {
        auto id = identity(d.value);
        if (id.empty()) continue;
        auto [first, inserted] = seen.emplace(std::move(id), &d);
        if (!inserted) clash(d, *first->second);
    }
}

std::optional<std::string> whole_disk_of(const std::string& dev, const std::filesystem::path& sysfs) {
    std::error_code ec;
    const auto node = std::filesystem::canonical(sysfs / "dev" / "block" / dev, ec);
    if (ec || !std::filesystem::exists(node / "partition", ec)) return std::nullopt;
    std::ifstream in(node.parent_path() / "dev");
    std::string disk;
    if (!(in >> disk) || disk == dev) return std::nullopt;
    return disk;
}

namespace {

// What a file device's path stands for: the block device (st_rdev), the
// file (st_dev, st_ino), or, for a file not created yet, the path itself.
std::string storage_identity(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        if (S_ISBLK(st.st_mode)) return "block " + std::to_string(major(st.st_rdev)) + ":" + std::to_string(minor(st.st_rdev));
        return "file " + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
    }
    return "path " + normal_path(path);
}

constexpr std::string_view block_prefix = "block ";

std::string file_identity(const Device& d) {
    return d.backend == BackendKind::file && !d.path.empty() ? storage_identity(d.path) : "";
}

std::string why_not_shared() {
    return "each would keep its own read-ahead cache and O_DIRECT block guard, so a read through one could miss a "
           "write through the other; export both from one device (an export takes offset and size)";
}

std::string where(const Parsed<Device>& d) {
    return "path " + d.value.path + ", line " + std::to_string(d.where("path").line);
}

// A partition and the whole disk it is on overlap although they are two
// block devices (/dev/sda and /dev/sda1, /dev/loop0 and /dev/loop0p1).
void check_partition_overlap(Reader& r, const std::vector<Parsed<Device>>& devices) {
    // Each block device's major:minor (a stat each), once.
    std::vector<std::pair<const Parsed<Device>*, std::string>> blocks;
    for (const auto& d : devices)
        if (auto id = file_identity(d.value); id.starts_with(block_prefix))
            blocks.emplace_back(&d, id.substr(block_prefix.size()));
    std::map<std::string, const Parsed<Device>*> disks;   // major:minor -> its first device
    for (const auto& [d, number] : blocks) disks.emplace(number, d);
    for (const auto& [partition, number] : blocks) {
        const Parsed<Device>& d = *partition;
        auto disk = whole_disk_of(number);
        if (!disk) continue;
        auto found = disks.find(*disk);
        if (found == disks.end()) continue;
        const Parsed<Device>& whole = *found->second;
        // Reported at the later of the two, as a clash of one storage is.
        const bool partition_later = &d > &whole;
        const Parsed<Device>& later = partition_later ? d : whole;
        const Parsed<Device>& earlier = partition_later ? whole : d;
        r.error(later.where("path"), later.key("path"),
                "device " + later.value.name + " is over " +
                    (partition_later ? "a partition of the disk that" : "the whole disk of the partition that") +
                    " device " + earlier.value.name + " is over (" + where(earlier) + "): " + why_not_shared());
    }
}

}   // namespace

void check_shared_storage(Reader& r, const std::vector<Parsed<Device>>& devices) {
    for_each_shared(devices, file_identity, [&](const Parsed<Device>& d, const Parsed<Device>& other) {
        const bool block_device = file_identity(d.value).starts_with(block_prefix);
        r.error(d.where("path"), d.key("path"),
                "device " + d.value.name + " is over the same " + (block_device ? "block device" : "file") +
                    " as device " + other.value.name + " (" + where(other) + "): " + why_not_shared());
    });
    check_partition_overlap(r, devices);
}

}   // namespace nbdsched::config::detail
