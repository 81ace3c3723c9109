// load_file / load_string: YAML text to a validated Config.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

#include "config/documents.hpp"
#include "config/parsers.hpp"

namespace nbdsched::config {
namespace {

// Far above any real configuration, and bounded: a file that grows without
// end (a log by mistake) is refused instead of read until memory runs out.
constexpr std::uint64_t max_config_bytes = 16ull << 20;
constexpr const char* too_large = "larger than 16MiB: not a configuration file";

std::string file_kind(mode_t mode) {
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a file";
}

}   // namespace

namespace detail {
namespace {

template <class T>
void read_entries(Reader& r, const Field& field, std::vector<Parsed<T>>& out,
                  std::optional<Parsed<T>> (*parse)(Reader&, const Field&)) {
    r.read_list(field, [&](const Field& item, std::size_t) {
        if (auto entry = parse(r, item)) out.push_back(std::move(*entry));
    });
}

// Debian's civetweb (under prometheus-cpp's Exposer) is built without IPv6:
// it cannot bind "[::1]:9810" or "[::]:9810", so the start would fail.
constexpr const char* metrics_ipv6_refused =
    "an IPv6 address: the metrics endpoint (prometheus-cpp's civetweb) listens on IPv4 only; use 127.0.0.1:PORT, "
    "or 0.0.0.0:PORT for every address";

// `devices: []` (a template that expanded to nothing): a daemon serving nothing.
bool is_empty_list(const Field& f) { return f.value.IsSequence() && f.value.size() == 0; }

std::optional<std::string> read_socket_path(Reader& r, const Field& f) {
    auto v = r.string(f);
    std::string error;
    if (v && !check_socket_path(*v, error)) {
        r.error(f, error);
        return std::nullopt;
    }
    return v;
}

void read_document(Reader& r, const YAML::Node& root, Config& config) {
    Field top = root_field(r, root);
    if (root.IsNull() || !root.IsDefined()) {
        r.error(Origin{r.file(), 0, 0}, "", "empty configuration: expected devices: and exports:");
        return;
    }
    Sections sections;
    Origin control_at;
    bool has_listen = false, has_devices = false, has_exports = false;
    bool ok = r.read_map(top,
                         {"listen", "devices", "exports", "groups", "rules", "control", "metrics", "log_level", "limits",
                          "tls"},
                         [&](const Field& f) {
                             if (f.key == "listen") {
                                 has_listen = true;
                                 config.listen = parse_listen(r, f);
                             } else if (f.key == "devices") {
                                 has_devices = true;
                                 read_entries(r, f, sections.devices, &parse_device);
                                 if (is_empty_list(f)) r.error(f, "empty: at least one device is needed");
                             } else if (f.key == "exports") {
                                 has_exports = true;
                                 read_entries(r, f, sections.exports, &parse_export);
                                 if (is_empty_list(f)) r.error(f, "empty: at least one export is needed");
                             } else if (f.key == "groups") {
                                 read_entries(r, f, sections.groups, &parse_group);
                             } else if (f.key == "rules") {
                                 read_entries(r, f, sections.rules, &parse_rule);
                             } else if (f.key == "control") {
                                 control_at = f.at;
                                 if (auto v = read_socket_path(r, f)) config.control = *v;
                             } else if (f.key == "metrics") {
                                 auto v = r.string(f);
                                 std::string error;
                                 auto where = v ? parse_host_port(*v, error) : std::nullopt;
                                 if (v && !where) r.error(f, error);
                                 else if (where && where->host.find(':') != std::string::npos)
                                     r.error(f, metrics_ipv6_refused);
                                 else if (v) config.metrics = *v;
                             } else if (f.key == "log_level") {
                                 if (auto v = r.choice(f, {"trace", "debug", "info", "warn", "error"})) config.log_level = *v;
                             } else if (f.key == "limits") {
                                 parse_limits(r, f, config.limits);
                             } else if (f.key == "tls") {
                                 parse_tls(r, f, config.tls);
                             }
                         });
    if (!ok) return;
    if (!has_listen) {
        config.listen = default_listen();
        if (auto why = default_listen_problem()) r.error(top.at, "listen", "not given, and " + *why);
    }
    check_listen_tls(r, config);
    check_control_apart(r, config, control_at);
    if (!has_devices) r.error(top.at, "devices", "missing: at least one device is needed");
    if (!has_exports) r.error(top.at, "exports", "missing: at least one export is needed");
    resolve(r, sections, config);
}

}   // namespace
}   // namespace detail

LoadResult load_string(const std::string& yaml, const std::string& name) {
    detail::Reader reader(name);
    Config config;
    config.source = name;
    try {
        const detail::DocumentProbe probe = detail::probe_documents(yaml);
        using Outcome = detail::DocumentProbe::Outcome;
        if (probe.outcome == Outcome::stuck) {
            const std::size_t at = static_cast<std::size_t>(probe.at.pos);
            const std::string seen = at < yaml.size() ? std::string("'") + yaml[at] + "'" : "end of input";
            reader.error(reader.origin(probe.at), "", "YAML syntax error: unexpected " + seen + " where a value should start");
        } else {
            if (probe.outcome == Outcome::several) {
                // Silently using the first of several documents would hide edits made to the others.
                reader.error(reader.origin(probe.at), "", "a second YAML document ('---'); the configuration is one document");
            }
            detail::read_document(reader, YAML::Load(yaml), config);
        }
    } catch (const YAML::ParserException& e) {
        reader.error(reader.origin(e.mark), "", "YAML syntax error: " + e.msg);
    } catch (const YAML::Exception& e) {
        // Not expected from a parsed document, but a config must never crash the daemon.
        reader.error(reader.origin(e.mark), "", "YAML error: " + e.msg);
    }
    LoadResult result;
    result.errors = reader.take_errors();
    if (result.errors.empty()) result.config = std::move(config);
    return result;
}

LoadResult load_file(const std::string& path) {
    LoadResult result;
    auto fail = [&](const std::string& message) {
        result.errors.push_back(Error{Origin{path, 0, 0}, "", message});
        return result;
    };
    // O_NONBLOCK: opening a FIFO would wait for a writer.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return fail(std::string("cannot read: ") + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { ::close(fd); }
    } closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0) return fail(std::string("cannot read: ") + std::strerror(errno));
    // A directory's failed read would look like an empty file; a device or
    // a FIFO may never end (/dev/zero would fill the memory).
    if (S_ISDIR(st.st_mode)) return fail("is a directory, not a configuration file");
    if (!S_ISREG(st.st_mode)) return fail("not a regular file (" + file_kind(st.st_mode) + ")");
    if (static_cast<std::uint64_t>(st.st_size) > max_config_bytes) return fail(too_large);
    std::string text;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return fail(std::string("cannot read: ") + std::strerror(errno));
        if (n == 0) break;
        text.append(buf, static_cast<std::size_t>(n));
        if (text.size() > max_config_bytes) return fail(too_large);   // grew while read
    }
    return load_string(text, path);
}

}   // namespace nbdsched::config
