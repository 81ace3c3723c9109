// The configuration used when none is given: something a newcomer can connect
// to at once, reachable only from this machine.
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>

#include "config/config.hpp"

namespace nbdsched::config {
namespace {

constexpr const char* embedded = "<embedded default>";

std::string default_socket_path() {
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    if (runtime && *runtime) return std::string(runtime) + "/nbdsched/nbdsched.sock";
    if (geteuid() == 0) return "/run/nbdsched/nbdsched.sock";
    // A per-user directory so two users on one machine do not collide.
    return "/tmp/nbdsched-" + std::to_string(getuid()) + "/nbdsched.sock";
}

}   // namespace

std::optional<std::string> default_listen_problem() {
    const std::string path = default_socket_path();
    constexpr std::size_t most = sizeof(sockaddr_un::sun_path) - 1;
    if (path.size() <= most) return std::nullopt;
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    const std::string from = runtime && *runtime ? " (from $XDG_RUNTIME_DIR)" : "";
    return "the default unix socket " + path + from + " is longer than " + std::to_string(most) +
           " bytes: give a listen: entry with a shorter path" + (from.empty() ? "" : ", or a shorter $XDG_RUNTIME_DIR");
}

std::vector<Listen> default_listen() {
    Listen unix_socket;
    unix_socket.kind = Listen::Kind::unix_socket;
    unix_socket.path = default_socket_path();
    unix_socket.origin = Origin{embedded, 0, 0};
    Listen tcp;
    tcp.kind = Listen::Kind::tcp;
    tcp.host = "127.0.0.1";
    tcp.port = 10809;
    tcp.origin = Origin{embedded, 0, 0};
    return {unix_socket, tcp};
}

Config embedded_default() {
    Config config;
    config.source = embedded;
    config.listen = default_listen();

    Device device;
    device.name = "d0";
    device.backend = BackendKind::ram;
    device.size = 1ull << 30;
    device.scheduler = "none";
    device.origin = Origin{embedded, 0, 0};
    config.devices.push_back(device);

    Export exp;
    exp.name = "default";
    exp.device = "d0";
    exp.description = "nbdsched embedded default: 1GiB RAM";
    exp.origin = Origin{embedded, 0, 0};
    config.exports.push_back(exp);

    Group group;
    group.name = "default";
    group.origin = Origin{embedded, 0, 0};
    config.groups.push_back(group);
    return config;
}

}   // namespace nbdsched::config
