#include "kernel/attach.hpp"

#include <fstream>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <vector>

#include "kernel/attach_record.hpp"

namespace nbdsched::kernel {

namespace {

using Clock = std::chrono::steady_clock;

std::string flags_text(std::uint16_t flags) {
    std::string s;
    auto add = [&](std::uint16_t bit, const char* name) {
        if (flags & bit) s += s.empty() ? name : std::string(",") + name;
    };
    add(nbd::tflag_read_only, "read-only");
    add(nbd::tflag_send_flush, "flush");
    add(nbd::tflag_send_fua, "fua");
    add(nbd::tflag_rotational, "rotational");
    add(nbd::tflag_send_trim, "trim");
    add(nbd::tflag_send_write_zeroes, "write-zeroes");
    add(nbd::tflag_can_multi_conn, "multi-conn");
    return s.empty() ? "none" : s;
}

// One negotiated connection whose export still has at least `size` bytes: a
// grown export grows the device with the reconnect, a shrunk one would cut
// the end off whatever lives on the device (a filesystem), so it waits.
std::optional<Connected> reconnect_one(const AttachOptions& o, std::uint64_t size, std::string& error) {
    auto c = connect_export(o.target, o.handshake_timeout, error);
    if (c && c->info.size < size) {
        error = "export '" + o.target.export_name + "' is now " + std::to_string(c->info.size) + " bytes, was " +
                std::to_string(size) + ": not reconnecting a device to a smaller export";
        return std::nullopt;
    }
    return c;
}

// What /dev/nbdN is attached to now, for a monitor started later (attach_record.hpp).
bool record_attachment(const AttachOptions& o, std::uint32_t index, std::string& error) {
    return write_record(index, {o.target.describe(), o.target.export_name, kernel_pid(index)}, error);
}

std::uint64_t sysfs_sectors(std::uint32_t index) {
    std::ifstream in("/sys/block/nbd" + std::to_string(index) + "/size");
    std::uint64_t sectors = 0;
    return in >> sectors ? sectors : 0;
}

// is_attached(), with STATUS's failure logged once, at debug: 6.12 gives no
// answer for a device every time (the VM test), and the size in sysfs, which
// always answers, decides then; a warning would send admins looking for a
// problem that is not there.
bool still_attached(Netlink& netlink, std::uint32_t index, bool& error_logged) {
    std::string error;
    bool attached = is_attached(netlink, index, error);
    if (!error.empty() && !error_logged) {
        spdlog::debug("/dev/nbd{}: {} (its size in sysfs tells instead)", index, error);
        error_logged = true;
    }
    return attached;
}

// After a reconnect to an export that is now larger than the device: the
// device grows to it. Only once the new socket is live: the kernel drains the
// requests in flight before it changes the size, and they need that socket.
void grow(Netlink& netlink, const AttachOptions& o, std::uint32_t index, std::uint64_t export_size,
          std::uint64_t& size) {
    if (export_size <= size) return;
    std::string error;
    if (!netlink.resize(index, export_size, error)) {
        spdlog::warn("/dev/nbd{}: export '{}' grew to {} bytes, the device stays at {}: {}", index,
                     o.target.export_name, export_size, size, error);
        return;
    }
    spdlog::info("/dev/nbd{}: export '{}' grew from {} to {} bytes: the device grows with it", index,
                 o.target.export_name, size, export_size);
    size = export_size;
}

}   // namespace

bool is_attached(Netlink& netlink, std::uint32_t index, std::string& status_error) {
    status_error.clear();
    auto connected = netlink.connected(index, status_error);
    return connected.value_or(true) && sysfs_sectors(index) > 0;
}

std::optional<Attached> attach(Netlink& netlink, const AttachOptions& o, std::string& error) {
    std::vector<Connected> connections;
    std::vector<int> fds;
    for (unsigned i = 0; i < o.connections; ++i) {
        auto c = connect_export(o.target, o.handshake_timeout, error);
        if (c && i > 0 && c->info.size != connections.front().info.size) {
            error = "export '" + o.target.export_name + "' changed size while connecting";
            return std::nullopt;
        }
        if (!c) return std::nullopt;
        fds.push_back(c->socket.get());
        connections.push_back(std::move(*c));
    }
    const auto& info = connections.front().info;
    if (o.connections > 1 && !(info.flags & nbd::tflag_can_multi_conn))
        spdlog::warn("export '{}' does not advertise multi-conn: {} connections may see each other's writes late",
                     o.target.export_name, o.connections);
    if (o.device.block_size < info.min_block || o.device.block_size > info.max_block) {
        error = "block size " + std::to_string(o.device.block_size) + " outside the export's " +
                std::to_string(info.min_block) + ".." + std::to_string(info.max_block);
        return std::nullopt;
    }
    DeviceConfig device = o.device;
    device.size = info.size;
    device.server_flags = info.flags;
    auto index = netlink.connect(device, fds, error);
    if (!index) return std::nullopt;
    std::string record_error;
    if (!record_attachment(o, *index, record_error))
        spdlog::warn("/dev/nbd{}: {}: a monitor restarted later will not take the device over", *index,
                     record_error);
    spdlog::info("/dev/nbd{}: export '{}' at {}, {} bytes, block size {}, {} connection(s), flags {}, timeout {}s, "
                 "dead-connection timeout {}s",
                 *index, o.target.export_name, o.target.describe(), info.size, device.block_size, o.connections,
                 flags_text(info.flags), device.timeout.count(), device.dead_conn_timeout.count());
    return Attached{*index, info};   // the kernel holds its own references to the sockets
}

namespace {

// A device with no record: attached by an `nbdsched attach` from before
// records (its monitor restarted by a package upgrade) or by another tool.
// Taken over only when the export answers with exactly the device's size,
// then recorded: a device of another size is surely another export's, and
// refusing every such device would leave an upgraded host's devices without
// a monitor, so a daemon restart would fail their I/O.
bool adopt_without_record(const AttachOptions& o, const Attached& a, const std::string& device, std::string& error) {
    const auto refuse = device + " is already attached, but there is no record of what to (" +
                        record_path(a.index) + ")";
    std::string probe_error;
    auto c = connect_export(o.target, o.handshake_timeout, probe_error);
    if (!c) {
        error = refuse + ", and export '" + o.target.export_name + "' cannot be checked against it: " + probe_error +
                ": not taking it over yet";
        return false;
    }
    if (c->info.size != a.info.size) {
        error = refuse + ", and export '" + o.target.export_name + "' has " + std::to_string(c->info.size) +
                " bytes where the device has " + std::to_string(a.info.size) +
                ": not taking it over; detach it first or choose another device";
        return false;
    }
    spdlog::warn("{}: no record of what it is attached to (attached by an older nbdsched, or by another tool): "
                 "export '{}' at {} has its size ({} bytes), so taking it over and recording it; detach and attach "
                 "it again to be sure it is that export",
                 device, o.target.export_name, o.target.describe(), a.info.size);
    std::string record_error;
    if (!record_attachment(o, a.index, record_error))
        spdlog::warn("{}: {}", device, record_error);
    return true;
}

}   // namespace

std::optional<Attached> adopt(Netlink& netlink, const AttachOptions& o, std::uint32_t index, std::string& error) {
    // STATUS answered without the device on 6.12 in the VM test, so its
    // size in sysfs decides when STATUS gives no answer.
    std::string status_error;
    auto connected = netlink.connected(index, status_error);
    error.clear();
    if (connected && !*connected) return std::nullopt;
    Attached a{index, {}};
    a.info.size = sysfs_sectors(index) * 512;    // sysfs counts 512-byte sectors whatever the block size
    if (a.info.size == 0) return std::nullopt;   // not attached: attach() connects it
    const auto device = "/dev/nbd" + std::to_string(index);
    auto record = read_record(index);
    if (!record) {
        if (!adopt_without_record(o, a, device, error)) return std::nullopt;
    } else if (auto why = record_mismatch(*record, o.target, kernel_pid(index)); !why.empty()) {
        error = device + " is already attached, but " + why + ": not taking it over; detach it first or " +
                "choose another device";
        return std::nullopt;
    }
    spdlog::info("{}: already attached to export '{}' at {} ({} bytes): monitoring it", device,
                 o.target.export_name, o.target.describe(), a.info.size);
    return a;
}

int monitor(Netlink& netlink, LinkDeadEvents& events, const AttachOptions& o, const Attached& a, bool probe_first) {
    unsigned dead = probe_first ? 1 : 0;   // sockets the kernel reported dead and we have not replaced
    // The first reconnect of an adopted device only replaces what died while
    // no monitor listened: it never resizes the device, whatever the export's
    // size is now (a grown export grows the device at the next reconnect).
    bool probing = probe_first;
    std::uint64_t size = a.info.size;   // grows when a reconnect finds the export grown
    Clock::time_point dead_since = Clock::now(), last_status = Clock::now();
    std::string last_error;
    bool status_error_logged = false;
    for (;;) {
        auto wait = dead > 0 ? o.retry_interval : std::chrono::milliseconds(1000);
        pollfd p{events.fd(), POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(wait.count()));
        for (auto index : events.read()) {
            if (index != a.index) continue;
            if (dead++ == 0) dead_since = Clock::now();
            spdlog::warn("/dev/nbd{}: connection to {} died, reconnecting", a.index, o.target.describe());
        }
        std::string error;
        while (dead > 0) {
            auto c = reconnect_one(o, size, error);
            if (!c) {
                if (error != last_error) spdlog::info("/dev/nbd{}: still waiting: {}", a.index, error);
                last_error = error;
                break;
            }
            last_error.clear();
            auto replaced = netlink.replace_socket(a.index, c->socket.get(), error);
            if (!replaced || !*replaced) {
                // Refused: the device went away (the status check below ends
                // the monitor). Not taken: every socket of the device is
                // alive (an adopted device lost none while no monitor
                // listened, or fewer died than events came); the kernel
                // closed the new one.
                if (!replaced) spdlog::info("/dev/nbd{}: {}", a.index, error);
                else if (probing) spdlog::info("/dev/nbd{}: its connections are alive: nothing to replace", a.index);
                else spdlog::info("/dev/nbd{}: no dead connection left to replace", a.index);
                dead = 0;
                probing = false;
                break;
            }
            --dead;
            if (!probing) grow(netlink, o, a.index, c->info.size, size);
            probing = false;
            auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - dead_since).count();
            spdlog::info("/dev/nbd{}: reconnected to {} after {} ms", a.index, o.target.describe(), ms);
        }
        // Also while waiting for the daemon: a detach then ends the wait.
        if (Clock::now() - last_status >= std::chrono::seconds(1)) {
            last_status = Clock::now();
            if (!still_attached(netlink, a.index, status_error_logged)) {
                spdlog::info("/dev/nbd{}: disconnected, monitor exits", a.index);
                remove_record(a.index);
                return 0;
            }
        }
    }
}

}   // namespace nbdsched::kernel
