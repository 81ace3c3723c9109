// load_file / load_string: YAML text to a validated Config.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "config/documents.hpp"
#include "config/parsers.hpp"

namespace nbdsched::config {
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
                             } else if (f.key == "exports") {
                                 has_exports = true;
                                 read_entries(r, f, sections.exports, &parse_export);
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
    // An ifstream opens a directory, and its failed read would look like an empty file.
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
        LoadResult result;
        result.errors.push_back(Error{Origin{path, 0, 0}, "", "is a directory, not a configuration file"});
        return result;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        int err = errno;
        LoadResult result;
        result.errors.push_back(Error{Origin{path, 0, 0}, "", std::string("cannot read: ") + std::strerror(err)});
        return result;
    }
    std::ostringstream text;
    text << in.rdbuf();
    return load_string(text.str(), path);
}

}   // namespace nbdsched::config
