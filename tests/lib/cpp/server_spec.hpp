// What the test daemon serves, written out as its YAML configuration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nbdsched::testlib {

struct DeviceSpec {
    std::string name;
    std::string backend = "ram";   // ram | file
    std::uint64_t size = 64ull << 20;
    std::string path;         // file: empty = <tempdir>/<name>.img
    std::string rotational;   // "" (default) | auto | true | false
    std::string yaml;         // more keys of the device, each line "    key: value\n"
};

struct ExportSpec {
    std::string name;
    std::string device;
    bool readonly = false;
    std::string description;
    std::uint64_t offset = 0;   // window into the device (nbdsched only)
    std::uint64_t size = 0;     // 0 = the rest of the device
};

struct ServerSpec {
    std::vector<DeviceSpec> devices;
    std::vector<ExportSpec> exports;
    bool tcp = true;   // also listen on a free 127.0.0.1 port
    // When not empty: the YAML after `listen:` (devices, exports, groups,
    // limits, control) as written, in place of devices/exports above, for
    // configurations the specs do not cover (schedulers, limits, faults).
    std::string body;
};

DeviceSpec device(std::string name, std::string backend, std::uint64_t size);
ExportSpec export_of(std::string name, std::string device, bool readonly = false,
                     std::string description = "");

// One RAM device "d0" (64 MiB) exported read-write as "default" and read-only
// as "ro"; the shape most tests need.
ServerSpec standard_spec();
// One RAM device "d0" of `size` bytes exported as "default", with `yaml`
// (device keys such as "    profile: hdd\n") added under it; unix socket only.
ServerSpec profile_spec(const std::string& yaml, std::uint64_t size = 1ull << 30);
// A configuration written by the test itself (see ServerSpec::body); unix socket only.
ServerSpec yaml_spec(std::string body);

// The whole configuration file: listeners, then the body or the specs.
std::string config_text(const ServerSpec& spec, const std::string& unix_socket, std::uint16_t tcp_port);

}   // namespace nbdsched::testlib
