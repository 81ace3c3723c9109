#include "server_spec.hpp"

#include <sstream>

namespace nbdsched::testlib {

namespace {

std::string size_text(std::uint64_t bytes) {
    const char* units[] = {"GiB", "MiB", "KiB"};
    const std::uint64_t scale[] = {1ull << 30, 1ull << 20, 1ull << 10};
    for (int i = 0; i < 3; ++i)
        if (bytes != 0 && bytes % scale[i] == 0)
            return std::to_string(bytes / scale[i]) + units[i];
    return std::to_string(bytes);
}

// YAML double-quoted scalar.
std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out + "\"";
}

void write_devices(std::ostream& f, const ServerSpec& spec) {
    f << "devices:\n";
    for (const auto& d : spec.devices) {
        f << "  - name: " << d.name << "\n    backend: " << d.backend
          << "\n    size: " << size_text(d.size) << "\n";
        if (d.backend == "file") f << "    path: " << quoted(d.path) << "\n";
        if (!d.rotational.empty()) f << "    rotational: " << d.rotational << "\n";
        f << d.yaml;
    }
    f << "exports:\n";
    for (const auto& e : spec.exports) {
        f << "  - name: " << quoted(e.name) << "\n    device: " << e.device
          << "\n    readonly: " << (e.readonly ? "true" : "false") << "\n";
        if (!e.description.empty()) f << "    description: " << quoted(e.description) << "\n";
        if (e.offset != 0) f << "    offset: " << size_text(e.offset) << "\n";
        if (e.size != 0) f << "    size: " << size_text(e.size) << "\n";
    }
}

}   // namespace

DeviceSpec device(std::string name, std::string backend, std::uint64_t size) {
    DeviceSpec d;
    d.name = std::move(name);
    d.backend = std::move(backend);
    d.size = size;
    return d;
}

ExportSpec export_of(std::string name, std::string device, bool readonly,
                     std::string description) {
    ExportSpec e;
    e.name = std::move(name);
    e.device = std::move(device);
    e.readonly = readonly;
    e.description = std::move(description);
    return e;
}

ServerSpec standard_spec() {
    ServerSpec s;
    s.devices.push_back(device("d0", "ram", 64ull << 20));
    s.exports.push_back(export_of("default", "d0", false, "integration test RAM export"));
    s.exports.push_back(export_of("ro", "d0", true, "read-only view"));
    return s;
}

ServerSpec profile_spec(const std::string& yaml, std::uint64_t size) {
    ServerSpec s;
    s.tcp = false;
    auto d = device("d0", "ram", size);
    d.yaml = yaml;
    s.devices.push_back(d);
    s.exports.push_back(export_of("default", "d0"));
    return s;
}

ServerSpec yaml_spec(std::string body) {
    ServerSpec s;
    s.tcp = false;
    s.body = std::move(body);
    return s;
}

std::string config_text(const ServerSpec& spec, const std::string& unix_socket, std::uint16_t tcp_port) {
    std::ostringstream f;
    f << "listen:\n  - unix: " << quoted(unix_socket) << "\n";
    if (spec.tcp) f << "  - tcp: 127.0.0.1:" << tcp_port << "\n";
    if (spec.body.empty()) write_devices(f, spec);
    else f << spec.body;
    return f.str();
}

}   // namespace nbdsched::testlib
