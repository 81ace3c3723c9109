// The kernel nbd driver's generic netlink interface (family "nbd",
// include/uapi/linux/nbd-netlink.h) through libnl-genl-3: connect a device
// to sockets the caller negotiated, replace dead sockets, disconnect, ask
// whether a device is connected, and hear about dead links.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

struct nl_sock;

namespace nbdsched::kernel {

struct DeviceConfig {
    std::optional<std::uint32_t> index;   // unset: the kernel picks a free /dev/nbdN
    std::uint64_t size = 0;
    std::uint64_t block_size = 4096;
    std::uint64_t server_flags = 0;   // the transmission flags from NBD_OPT_GO
    std::chrono::seconds timeout{30};
    std::chrono::seconds dead_conn_timeout{120};
};

// One generic netlink socket to the "nbd" family, for requests.
class Netlink {
public:
    // nullptr with `error` when the nbd module is not loaded or netlink fails.
    static std::unique_ptr<Netlink> open(std::string& error);
    ~Netlink();

    // NBD_CMD_CONNECT; the device index the kernel used.
    std::optional<std::uint32_t> connect(const DeviceConfig& config, std::span<const int> fds, std::string& error);
    // NBD_CMD_RECONFIGURE with one new socket: true when it replaced a dead
    // one, false when the device had none dead. The kernel answers success
    // either way (nbd_genl_reconfigure turns nbd_reconnect_socket's -ENOSPC
    // into 0, drivers/block/nbd.c, every version up to 6.12 at least) and
    // drops the socket it did not take; what tells them apart is the send
    // timeout nbd_reconnect_socket sets on a socket it takes
    // (sk_sndtimeo = the request timeout, never 0 for `nbdsched attach`).
    // nullopt with `error` when the kernel refused (the device went away).
    std::optional<bool> replace_socket(std::uint32_t index, int fd, std::string& error);
    // NBD_CMD_RECONFIGURE with only a new size in bytes. The kernel freezes
    // the queue to change it, which waits for every request in flight: call
    // it with live sockets, never in the same message as the socket that
    // those requests wait for (the kernel sets the size first).
    bool resize(std::uint32_t index, std::uint64_t size, std::string& error);
    bool disconnect(std::uint32_t index, std::string& error);
    // NBD_CMD_STATUS: whether the device has a configuration (attached,
    // even while its sockets are dead); nullopt with `error` on failure.
    std::optional<bool> connected(std::uint32_t index, std::string& error);
    int family() const { return family_; }

private:
    Netlink(nl_sock* sock, int family) : sock_(sock), family_(family) {}
    nl_sock* sock_;
    int family_;
};

// A socket subscribed to the nbd multicast group: NBD_CMD_LINK_DEAD arrives
// on it once for each socket of a device that dies (nbd_mark_nsock_dead).
class LinkDeadEvents {
public:
    static std::unique_ptr<LinkDeadEvents> open(std::string& error);
    ~LinkDeadEvents();
    int fd() const;   // poll it for POLLIN, then read()
    // The device indexes of the events that have arrived (non-blocking).
    std::vector<std::uint32_t> read();

private:
    explicit LinkDeadEvents(nl_sock* sock) : sock_(sock) {}
    nl_sock* sock_;
    std::vector<std::uint32_t> pending_;
};

// "/dev/nbd3" -> 3; nullopt for anything else.
std::optional<std::uint32_t> parse_device(const std::string& path);

}   // namespace nbdsched::kernel
