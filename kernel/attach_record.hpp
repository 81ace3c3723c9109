// What `nbdsched attach` connected /dev/nbdN to, kept in a small file so that
// a monitor started later (systemd's Restart=, a second `attach --device`)
// takes over only a device it would have attached itself, never one that
// serves another export or another server.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernel/connect.hpp"

namespace nbdsched::kernel {

struct AttachRecord {
    std::string target;        // Target::describe(): the unix socket, or host:port
    std::string export_name;   // empty: the server's default export
    // /sys/block/nbdN/pid right after the connect: the process the kernel
    // names as the device's owner until it is disconnected. A record whose
    // pid differs is left over from an earlier attachment of the same device.
    std::uint64_t kernel_pid = 0;
};

// One "key=value" line per field; parse_record is nullopt on anything else.
std::string format_record(const AttachRecord& record);
std::optional<AttachRecord> parse_record(std::string_view text);

// Empty when `record` is an attachment of `target` that the kernel still
// holds (`kernel_pid`: /sys/block/nbdN/pid, 0 when unknown); otherwise why
// taking the device over would be wrong.
std::string record_mismatch(const AttachRecord& record, const Target& target, std::uint64_t kernel_pid);

// /run/nbdsched-attach/nbdN. In /run: a tmpfs emptied at boot, when every
// kernel attachment is gone too, so a record never outlives its device by a
// reboot. Not in /run/nbdsched: that is the daemon's RuntimeDirectory, owned by
// the user it runs as, which must not be able to write what a root monitor
// trusts.
std::string record_directory();
std::string record_path(std::uint32_t index);
bool write_record(std::uint32_t index, const AttachRecord& record, std::string& error);
// nullopt when there is no record or it cannot be read or parsed.
std::optional<AttachRecord> read_record(std::uint32_t index);
void remove_record(std::uint32_t index);

// /sys/block/nbdN/pid; 0 when the device has no owner or the file is missing.
std::uint64_t kernel_pid(std::uint32_t index);

}   // namespace nbdsched::kernel
