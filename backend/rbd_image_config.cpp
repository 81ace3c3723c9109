// Reading and checking an image's own configuration (rbd_image_config.hpp).
#include "backend/rbd_image_config.hpp"
#include "backend/rbd_library.hpp"

#include <cerrno>
#include <cstring>
#include <map>
#include <vector>

namespace nbdsched::backend {

namespace {

struct Option {
    std::string value;
    int source = RBD_CONFIG_SOURCE_CONFIG;
};
using Options = std::map<std::string, Option>;

// The image's effective options, each with where its value comes from; -errno.
int read_options(rbd_image_t image, Options& out) {
    std::vector<rbd_config_option_t> options(256);
    int count = static_cast<int>(options.size());
    int r = librbd().rbd_config_image_list(image, options.data(), &count);
    if (r == -ERANGE) {   // count says how many there are
        options.resize(static_cast<std::size_t>(count));
        r = librbd().rbd_config_image_list(image, options.data(), &count);
    }
    if (r < 0) return r;
    for (int i = 0; i < count; ++i) {
        const rbd_config_option_t& o = options[static_cast<std::size_t>(i)];
        out[o.name] = {o.value, static_cast<int>(o.source)};
    }
    librbd().rbd_config_image_list_cleanup(options.data(), count);
    return 0;
}

// Where an image's configuration option got its value, for a message.
std::string source_text(int source, const std::string& name) {
    return source == RBD_CONFIG_SOURCE_IMAGE  ? "the image's configuration (rbd config image ls " + name + ")"
           : source == RBD_CONFIG_SOURCE_POOL ? "its pool's configuration (rbd config pool ls " +
                                                    name.substr(0, name.find('/')) + ")"
                                              : "the client's configuration";
}

// The command that takes an option off the image or its pool.
std::string remove_text(int source, const std::string& name, const char* key) {
    return source == RBD_CONFIG_SOURCE_POOL ? "rbd config pool rm " + name.substr(0, name.find('/')) + " " + key
                                            : "rbd config image rm " + name + " " + key;
}

// A pool's or image's `rbd config ... set` outranks what connect() set, at
// rbd_open. Checks the image's effective rbd_cache settings against what
// the device asked for (RbdSpec::cache). With the cache off, an override
// that turns it on is refused: librbd would answer writes from this host's
// memory (docs/rbd.md). With the cache on, an override that turns it off
// or changes its policy is not refused (every mode keeps the FLUSH
// promise) but told in `warning`. `mode`: the cache in force ("" = off).
// The refusal's text, or "".
std::string check_cache(const Options& options, const std::string& name, RbdCache asked, std::string& mode,
                        std::string& warning) {
    auto option = [&](const char* key) {
        auto it = options.find(key);
        return it == options.end() ? Option{} : it->second;
    };
    const Option cache = option("rbd_cache"), policy = option("rbd_cache_policy"),
                 until_flush = option("rbd_cache_writethrough_until_flush");
    mode.clear();
    if (asked == RbdCache::off) {
        if (cache.value == "false") return "";
        return "rbd_cache is " + cache.value + " in " + source_text(cache.source, name) +
               ", which outranks nbdsched's rbd_cache=false: librbd would acknowledge writes from this host's "
               "memory before the OSDs have them. Turn it off for this image: rbd config image set " +
               name + " rbd_cache false (or choose librbd's cache on the device: rbd_cache: writearound or writeback)";
    }
    const std::string device = std::string("the device's rbd_cache: ") + cache_name(asked);
    if (cache.value == "false") {
        warning = "rbd_cache is false in " + source_text(cache.source, name) + ", which outranks " + device +
                  ": librbd's cache is off for this image (a write is answered once the OSDs have it). To have "
                  "it: " +
                  remove_text(cache.source, name, "rbd_cache");
        return "";
    }
    mode = policy.value;
    if (policy.value != cache_name(asked))
        warning = "rbd_cache_policy is " + policy.value + " in " + source_text(policy.source, name) +
                  ", which outranks " + device + ": librbd runs its cache " + policy.value + ". To have " +
                  cache_name(asked) + ": " + remove_text(policy.source, name, "rbd_cache_policy");
    if (until_flush.value == "true" && policy.value != "writethrough") {
        mode += " after the first FLUSH";
        warning += std::string(warning.empty() ? "" : "; ") + "rbd_cache_writethrough_until_flush is true in " +
                   source_text(until_flush.source, name) +
                   ", which outranks nbdsched's false: librbd writes through until a client's first FLUSH. To "
                   "have the cache at once: " +
                   remove_text(until_flush.source, name, "rbd_cache_writethrough_until_flush");
    }
    return "";
}

// librbd copies each write before rbd_aio_writev returns unless
// rbd_disable_zero_copy_writes is false, and connect() sets it true; a
// pool's or image's own false outranks that at rbd_open. Without the copy,
// librbd holds a write's completion until nothing refers to its buffer,
// which never comes once this client is blocklisted (another host's
// --break-lock): its writes would wait for ever instead of failing with
// ESHUTDOWN (docs/rbd.md, "librbd copies each write"). The refusal's text, or "".
std::string check_write_copy(const Options& options, const std::string& name) {
    constexpr const char* key = "rbd_disable_zero_copy_writes";
    auto it = options.find(key);
    if (it == options.end() || it->second.value != "false") return "";
    const int source = it->second.source;
    const std::string set = "rbd config image set " + name + " " + key + " true";
    const std::string fix = source == RBD_CONFIG_SOURCE_IMAGE  ? remove_text(source, name, key)
                            : source == RBD_CONFIG_SOURCE_POOL ? remove_text(source, name, key) +
                                                                     " (or, for this image only: " + set + ")"
                                                               : set;
    return std::string(key) + " is false in " + source_text(source, name) +
           ", which outranks nbdsched's true: without its copy of each write, librbd would hold a write's "
           "completion until nothing refers to its buffer, and once this daemon is fenced (another host's "
           "--break-lock) its writes would hang instead of failing. To have the copy: " +
           fix;
}

}   // namespace

// The table's words are string literals: data() ends with a NUL.
const char* cache_name(RbdCache cache) {
    for (const auto& [c, word] : rbd_cache_names)
        if (c == cache) return word.data();
    return "off";
}

std::string check_image_config(rbd_image_t image, const std::string& name, RbdCache asked, std::string& mode,
                               std::string& warning) {
    Options options;
    if (int r = read_options(image, options); r < 0)
        return std::string("cannot read the image's configuration (rbd config image ls): ") +
               std::strerror(-r);
    if (std::string refused = check_write_copy(options, name); !refused.empty()) return refused;
    return check_cache(options, name, asked, mode, warning);
}

}   // namespace nbdsched::backend
