#include "kernel/netlink.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <sys/time.h>
#include <utility>

#include <linux/nbd-netlink.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>
#include <netlink/netlink.h>

namespace nbdsched::kernel {

namespace {

std::string nl_text(int rc) { return nl_geterror(rc); }

nl_sock* genl_socket(std::string& error) {
    nl_sock* sock = nl_socket_alloc();
    if (!sock) {
        error = "netlink: out of memory";
        return nullptr;
    }
    if (int rc = genl_connect(sock); rc < 0) {
        error = "netlink: " + nl_text(rc);
        nl_socket_free(sock);
        return nullptr;
    }
    return sock;
}

// A message for `cmd` of the nbd family; nullptr on allocation failure.
nl_msg* message(int family, std::uint8_t cmd) {
    nl_msg* msg = nlmsg_alloc();
    if (msg && !genlmsg_put(msg, NL_AUTO_PORT, NL_AUTO_SEQ, family, 0, 0, cmd, NBD_GENL_VERSION)) {
        nlmsg_free(msg);
        return nullptr;
    }
    return msg;
}

bool put_sockets(nl_msg* msg, std::span<const int> fds) {
    nlattr* list = nla_nest_start(msg, NBD_ATTR_SOCKETS);
    if (!list) return false;
    for (int fd : fds) {
        nlattr* item = nla_nest_start(msg, NBD_SOCK_ITEM);
        if (!item || nla_put_u32(msg, NBD_SOCK_FD, static_cast<std::uint32_t>(fd)) < 0) return false;
        nla_nest_end(msg, item);
    }
    nla_nest_end(msg, list);
    return true;
}

// Sends `msg` (freed here), waits for the kernel's answer; replies with data
// go to `on_reply` first.
bool send(nl_sock* sock, nl_msg* msg, const char* what, std::string& error, nl_recvmsg_msg_cb_t on_reply = nullptr,
          void* arg = nullptr) {
    if (!msg) {
        error = std::string(what) + ": out of memory";
        return false;
    }
    nl_recvmsg_msg_cb_t ignore = [](nl_msg*, void*) { return static_cast<int>(NL_OK); };
    nl_socket_modify_cb(sock, NL_CB_VALID, NL_CB_CUSTOM, on_reply ? on_reply : ignore, arg);
    int rc = nl_send_sync(sock, msg);
    if (rc < 0) error = std::string(what) + ": " + nl_text(rc);
    return rc >= 0;
}

int index_reply(nl_msg* msg, void* arg) {
    nlattr* attrs[NBD_ATTR_MAX + 1] = {};
    if (genlmsg_parse(nlmsg_hdr(msg), 0, attrs, NBD_ATTR_MAX, nullptr) == 0 && attrs[NBD_ATTR_INDEX])
        *static_cast<std::optional<std::uint32_t>*>(arg) = nla_get_u32(attrs[NBD_ATTR_INDEX]);
    return NL_OK;
}

struct StatusReply {
    std::optional<bool> connected;
    int replies = 0, parse_rc = 0;
};

int status_reply(nl_msg* msg, void* arg) {
    auto* reply = static_cast<StatusReply*>(arg);
    auto* connected = &reply->connected;
    ++reply->replies;
    nlattr* attrs[NBD_ATTR_MAX + 1] = {};
    reply->parse_rc = genlmsg_parse(nlmsg_hdr(msg), 0, attrs, NBD_ATTR_MAX, nullptr);
    if (reply->parse_rc != 0 || !attrs[NBD_ATTR_DEVICE_LIST]) return NL_OK;
    nlattr* item = nullptr;
    int left = 0;
    nla_for_each_nested(item, attrs[NBD_ATTR_DEVICE_LIST], left) {
        nlattr* dev[NBD_DEVICE_ATTR_MAX + 1] = {};
        if (nla_parse_nested(dev, NBD_DEVICE_ATTR_MAX, item, nullptr) == 0 && dev[NBD_DEVICE_CONNECTED])
            *connected = nla_get_u8(dev[NBD_DEVICE_CONNECTED]) != 0;
    }
    return NL_OK;
}

int link_dead(nl_msg* msg, void* arg) {
    auto* pending = static_cast<std::vector<std::uint32_t>*>(arg);
    auto* header = static_cast<genlmsghdr*>(nlmsg_data(nlmsg_hdr(msg)));
    nlattr* attrs[NBD_ATTR_MAX + 1] = {};
    if (header->cmd == NBD_CMD_LINK_DEAD && genlmsg_parse(nlmsg_hdr(msg), 0, attrs, NBD_ATTR_MAX, nullptr) == 0 &&
        attrs[NBD_ATTR_INDEX])
        pending->push_back(nla_get_u32(attrs[NBD_ATTR_INDEX]));
    return NL_OK;
}

}   // namespace

std::unique_ptr<Netlink> Netlink::open(std::string& error) {
    nl_sock* sock = genl_socket(error);
    if (!sock) return nullptr;
    int family = genl_ctrl_resolve(sock, NBD_GENL_FAMILY_NAME);
    if (family < 0) {
        error = "netlink family 'nbd' not found (is the nbd module loaded? modprobe nbd)";
        nl_socket_free(sock);
        return nullptr;
    }
    return std::unique_ptr<Netlink>(new Netlink(sock, family));
}

Netlink::~Netlink() { nl_socket_free(sock_); }

std::optional<std::uint32_t> Netlink::connect(const DeviceConfig& c, std::span<const int> fds, std::string& error) {
    nl_msg* msg = message(family_, NBD_CMD_CONNECT);
    bool ok = msg && (!c.index || nla_put_u32(msg, NBD_ATTR_INDEX, *c.index) == 0) &&
              nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, c.size) == 0 &&
              nla_put_u64(msg, NBD_ATTR_BLOCK_SIZE_BYTES, c.block_size) == 0 &&
              nla_put_u64(msg, NBD_ATTR_SERVER_FLAGS, c.server_flags) == 0 &&
              nla_put_u64(msg, NBD_ATTR_TIMEOUT, static_cast<std::uint64_t>(c.timeout.count())) == 0 &&
              nla_put_u64(msg, NBD_ATTR_DEAD_CONN_TIMEOUT, static_cast<std::uint64_t>(c.dead_conn_timeout.count())) ==
                  0 &&
              put_sockets(msg, fds);
    if (!ok) {
        if (msg) nlmsg_free(msg);
        error = "NBD_CMD_CONNECT: message too large";
        return std::nullopt;
    }
    std::optional<std::uint32_t> index;
    if (!send(sock_, msg, "NBD_CMD_CONNECT", error, index_reply, &index)) return std::nullopt;
    if (!index && c.index) index = c.index;
    if (!index) error = "NBD_CMD_CONNECT: the kernel did not say which device";
    return index;
}

std::optional<bool> Netlink::replace_socket(std::uint32_t index, int fd, std::string& error) {
    timeval none{};
    if (::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none) != 0) {
        error = std::string("SO_SNDTIMEO: ") + std::strerror(errno);
        return std::nullopt;
    }
    nl_msg* msg = message(family_, NBD_CMD_RECONFIGURE);
    if (msg && (nla_put_u32(msg, NBD_ATTR_INDEX, index) < 0 || !put_sockets(msg, std::span(&fd, 1)))) {
        nlmsg_free(msg);
        msg = nullptr;
    }
    if (!send(sock_, msg, "NBD_CMD_RECONFIGURE", error)) return std::nullopt;
    timeval set{};
    socklen_t length = sizeof set;
    if (::getsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &set, &length) != 0) {
        error = std::string("SO_SNDTIMEO: ") + std::strerror(errno);
        return std::nullopt;
    }
    return set.tv_sec != 0 || set.tv_usec != 0;
}

bool Netlink::resize(std::uint32_t index, std::uint64_t size, std::string& error) {
    nl_msg* msg = message(family_, NBD_CMD_RECONFIGURE);
    if (msg && (nla_put_u32(msg, NBD_ATTR_INDEX, index) < 0 || nla_put_u64(msg, NBD_ATTR_SIZE_BYTES, size) < 0)) {
        nlmsg_free(msg);
        msg = nullptr;
    }
    return send(sock_, msg, "NBD_CMD_RECONFIGURE (size)", error);
}

bool Netlink::disconnect(std::uint32_t index, std::string& error) {
    nl_msg* msg = message(family_, NBD_CMD_DISCONNECT);
    if (msg && nla_put_u32(msg, NBD_ATTR_INDEX, index) < 0) {
        nlmsg_free(msg);
        msg = nullptr;
    }
    return send(sock_, msg, "NBD_CMD_DISCONNECT", error);
}

std::optional<bool> Netlink::connected(std::uint32_t index, std::string& error) {
    nl_msg* msg = message(family_, NBD_CMD_STATUS);
    if (msg && nla_put_u32(msg, NBD_ATTR_INDEX, index) < 0) {
        nlmsg_free(msg);
        msg = nullptr;
    }
    StatusReply reply;
    if (!send(sock_, msg, "NBD_CMD_STATUS", error, status_reply, &reply)) return std::nullopt;
    if (!reply.connected)
        error = "NBD_CMD_STATUS: no answer for /dev/nbd" + std::to_string(index) + " (" +
                std::to_string(reply.replies) + " replies, parse " + nl_text(reply.parse_rc) + ")";
    return reply.connected;
}

std::unique_ptr<LinkDeadEvents> LinkDeadEvents::open(std::string& error) {
    nl_sock* sock = genl_socket(error);
    if (!sock) return nullptr;
    int group = genl_ctrl_resolve_grp(sock, NBD_GENL_FAMILY_NAME, NBD_GENL_MCAST_GROUP_NAME);
    int rc = group < 0 ? group : nl_socket_add_membership(sock, group);
    if (rc < 0) {
        error = std::string("netlink group ") + NBD_GENL_MCAST_GROUP_NAME + ": " + nl_text(rc);
        nl_socket_free(sock);
        return nullptr;
    }
    nl_socket_disable_seq_check(sock);
    nl_socket_set_nonblocking(sock);
    std::unique_ptr<LinkDeadEvents> events(new LinkDeadEvents(sock));
    nl_socket_modify_cb(sock, NL_CB_VALID, NL_CB_CUSTOM, link_dead, &events->pending_);
    return events;
}

LinkDeadEvents::~LinkDeadEvents() { nl_socket_free(sock_); }

int LinkDeadEvents::fd() const { return nl_socket_get_fd(sock_); }

std::vector<std::uint32_t> LinkDeadEvents::read() {
    // nl_recvmsgs_report: the number of messages read, 0 once the
    // non-blocking socket is empty, negative on an error.
    nl_cb* cb = nl_socket_get_cb(sock_);
    while (nl_recvmsgs_report(sock_, cb) > 0) {
    }
    nl_cb_put(cb);
    return std::exchange(pending_, {});
}

std::optional<std::uint32_t> parse_device(const std::string& path) {
    const std::string prefix = "/dev/nbd";
    if (path.size() <= prefix.size() || path.compare(0, prefix.size(), prefix) != 0) return std::nullopt;
    std::uint32_t index = 0;
    for (char c : path.substr(prefix.size())) {
        if (c < '0' || c > '9' || index > 100000) return std::nullopt;
        index = index * 10 + std::uint32_t(c - '0');
    }
    return index;
}

}   // namespace nbdsched::kernel
