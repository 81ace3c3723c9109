// devices[] with backend: rbd: the image and how to reach its cluster; no
// two devices on one image.
#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include "backend/features.hpp"
#include "config/parsers.hpp"

namespace nbdsched::config::detail {

namespace {

// An hour: past that a "timeout" is a typo for "wait forever" (0).
constexpr std::uint64_t max_timeout_seconds = 3600;

// Pool, image and namespace names end up in RADOS object names: no '/' or '@'
// (the rbd tool's pool/image@snap syntax), no control characters.
std::optional<std::string> read_rados_name(Reader& r, const Field& f, bool may_be_empty) {
    auto v = r.string(f);
    if (!v) return std::nullopt;
    if (v->empty() && !may_be_empty) {
        r.error(f, "empty name");
        return std::nullopt;
    }
    if (std::any_of(v->begin(), v->end(), [](char c) { return c == '/' || c == '@' || static_cast<unsigned char>(c) < 0x20; })) {
        r.error(f, "'" + *v + "': a name without '/', '@' or control characters");
        return std::nullopt;
    }
    return v;
}

// The words of rbd_cache:, from the table beside backend::RbdCache.
std::vector<std::string_view> cache_words() {
    std::vector<std::string_view> words;
    for (const auto& [cache, word] : backend::rbd_cache_names) words.push_back(word);
    return words;
}

}   // namespace

bool is_rbd_key(std::string_view key) {
    return std::find(std::begin(rbd_keys), std::end(rbd_keys), key) != std::end(rbd_keys);
}

void read_rbd_key(Reader& r, const Field& f, backend::RbdSpec& rbd) {
    const std::string& k = f.key;
    if (k == "pool") {
        if (auto v = read_rados_name(r, f, false)) rbd.pool = *v;
    } else if (k == "image") {
        if (auto v = read_rados_name(r, f, false)) rbd.image = *v;
    } else if (k == "namespace") {
        if (auto v = read_rados_name(r, f, true)) rbd.rados_namespace = *v;
    } else if (k == "client") {
        if (auto v = read_rados_name(r, f, false)) rbd.client = *v;
    } else if (k == "ceph_conf") {
        if (auto v = r.string(f)) {
            if (v->empty()) r.error(f, "empty path");
            rbd.ceph_conf = *v;
        }
    } else if (k == "osd_op_timeout") {
        if (auto v = r.integer(f, 0, max_timeout_seconds)) rbd.osd_op_timeout = static_cast<unsigned>(*v);
    } else if (k == "mount_timeout") {
        if (auto v = r.integer(f, 0, max_timeout_seconds)) rbd.mount_timeout = static_cast<unsigned>(*v);
    } else if (k == "rbd_cache") {
        // Ceph's own rbd_cache is a boolean; here the word says which cache.
        const std::string text = f.value.IsScalar() ? f.value.Scalar() : "";
        const auto words = cache_words();
        if (text == "true" || text == "false" || text == "on" || text == "yes" || text == "no") {
            std::string list;
            for (auto w : words) list += (list.empty() ? "" : ", ") + std::string(w);
            r.error(f, "expected one of " + list + ", got '" + text +
                           "': the word says which librbd cache (off: none; Ceph's rbd_cache true is writearound)");
        } else if (auto v = r.choice_in(f, words))
            for (const auto& [cache, word] : backend::rbd_cache_names)
                if (word == *v) rbd.cache = cache;
    }
}

void check_rbd(Reader& r, Parsed<Device>& p, const Origin& required_by) {
    if (!backend::rbd_available())
        r.error(p.where("backend"), p.key("backend"),
                "rbd is not built into this nbdsched (build it with librbd-dev installed, meson -Drbd=enabled)");
    if (p.at.count("image") == 0)
        r.error(required_by, p.key("image"), "missing: an rbd device needs an image (e.g. image: vol1)");
    for (const char* key : {"size", "path", "direct", "huge_pages", "io_engine", "io_cohorts"})
        if (p.at.count(key))
            r.error(p.where(key), p.key(key),
                    std::string("not for backend: rbd") + (key[0] == 's' ? " (the size is the image's)" : ""));
}

void check_shared_images(Reader& r, const std::vector<Parsed<Device>>& devices) {
    // The cluster an image is on, as far as the config tells: its ceph.conf
    // (./ceph.conf and ceph.conf are one) or librados' own search. Each part
    // goes in with its length, so no two different images read the same.
    auto image = [](const Device& d) {
        const backend::RbdSpec& rbd = d.rbd;
        if (d.backend != BackendKind::rbd || rbd.image.empty()) return std::string();
        std::string key;
        for (const std::string& part :
             {rbd.ceph_conf.empty() ? std::string() : normal_path(rbd.ceph_conf), rbd.pool, rbd.rados_namespace, rbd.image})
            key += std::to_string(part.size()) + ":" + part;
        return key;
    };
    for_each_shared(devices, image, [&](const Parsed<Device>& d, const Parsed<Device>& other) {
        const backend::RbdSpec& rbd = d.value.rbd;
        // Each device opens the image and takes its exclusive lock: the second
        // finds the first holding it (and --break-lock would blocklist the
        // daemon's own connection).
        r.error(d.where("image"), d.key("image"),
                "device " + d.value.name + " is on the same image as device " + other.value.name + " (" + rbd.pool +
                    "/" + (rbd.rados_namespace.empty() ? "" : rbd.rados_namespace + "/") + rbd.image + ", line " +
                    std::to_string(other.where("image").line) +
                    "): each device takes the image's exclusive lock, so the second could never open it; export "
                    "both from one device (an export takes offset and size)");
    });
}

}   // namespace nbdsched::config::detail
