// listen: entries, the metrics endpoint and socket paths.
#include <arpa/inet.h>
#include <sys/un.h>

#include <charconv>
#include <filesystem>

#include "config/parsers.hpp"

namespace nbdsched::config::detail {
namespace {

bool is_hostname(std::string_view host) {
    if (host.empty() || host.size() > 253) return false;
    for (char c : host) {
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '.';
        if (!ok) return false;
    }
    return true;
}

// Digits and dots only: meant as an IPv4 address, never a host name (a
// top-level domain is not all digits). Civetweb would scan "127.0.0.257" as
// 127.0.1.1; getaddrinfo takes "127.1" as 127.0.0.1.
bool looks_like_ipv4(std::string_view host) {
    return host.find_first_not_of("0123456789.") == std::string_view::npos;
}

bool is_ipv4(const std::string& host) {
    in_addr addr{};
    return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

bool is_ipv6(const std::string& host) {
    in6_addr addr{};
    return inet_pton(AF_INET6, host.c_str(), &addr) == 1;
}

}   // namespace

std::optional<HostPort> parse_host_port(std::string_view text, std::string& error) {
    HostPort out;
    std::string_view port;
    if (!text.empty() && text.front() == '[') {
        auto close = text.find(']');
        if (close == std::string_view::npos || close + 1 >= text.size() || text[close + 1] != ':') {
            error = "expected [IPv6]:PORT, e.g. [::1]:10809";
            return std::nullopt;
        }
        out.host = std::string(text.substr(1, close - 1));
        port = text.substr(close + 2);
        if (!is_ipv6(out.host)) {
            error = "'" + out.host + "' is not an IPv6 address";
            return std::nullopt;
        }
    } else {
        auto colon = text.rfind(':');
        if (colon == std::string_view::npos) {
            error = "expected HOST:PORT, e.g. 127.0.0.1:10809";
            return std::nullopt;
        }
        out.host = std::string(text.substr(0, colon));
        port = text.substr(colon + 1);
        if (out.host.find(':') != std::string::npos) {
            error = "an IPv6 address needs brackets: [" + out.host + "]:" + std::string(port);
            return std::nullopt;
        }
        if (out.host.empty()) {
            error = "host missing (use 0.0.0.0 or [::] to listen on every address)";
            return std::nullopt;
        }
        if (looks_like_ipv4(out.host) && !is_ipv4(out.host)) {
            error = "'" + out.host + "' is not an IPv4 address (four numbers 0..255, e.g. 127.0.0.1)";
            return std::nullopt;
        }
        if (!is_hostname(out.host)) {
            error = "'" + out.host + "' is not a host name or address";
            return std::nullopt;
        }
    }
    unsigned value = 0;
    auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || ptr != port.data() + port.size() || value == 0 || value > 65535) {
        error = "bad port '" + std::string(port) + "' (1..65535)";
        return std::nullopt;
    }
    out.port = static_cast<std::uint16_t>(value);
    return out;
}

bool check_socket_path(std::string_view path, std::string& error) {
    if (path.empty()) {
        error = "empty socket path";
        return false;
    }
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
        error = "socket path longer than " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
        return false;
    }
    if (path.find('\0') != std::string_view::npos) {
        error = "socket path contains a NUL byte";
        return false;
    }
    return true;
}

void check_control_apart(Reader& r, const Config& config, const Origin& control_at) {
    if (config.control.empty()) return;
    for (const auto& l : config.listen) {
        if (l.kind == Listen::Kind::unix_socket && same_socket_path(l.path, config.control)) {
            r.error(control_at, "control",
                    "the same socket as the listener at " + l.origin.str() +
                        ": the control socket needs a path of its own");
            return;
        }
    }
}

}   // namespace nbdsched::config::detail

namespace nbdsched::config {

std::optional<Listen> parse_tcp_listen(std::string_view text, std::string& error) {
    auto hp = detail::parse_host_port(text, error);
    if (!hp) return std::nullopt;
    Listen listen;
    listen.kind = Listen::Kind::tcp;
    listen.host = hp->host;
    listen.port = hp->port;
    return listen;
}

bool is_loopback(const Listen& listen) {
    if (listen.kind != Listen::Kind::tcp) return true;
    if (listen.host == "localhost") return true;
    in6_addr v6{};                                            // "::1" however it is written ("0:0::1")
    if (inet_pton(AF_INET6, listen.host.c_str(), &v6) == 1)   // also ::ffff:127.x, as an activated socket may show
        return IN6_IS_ADDR_LOOPBACK(&v6) || (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127);
    in_addr v4{};
    return inet_pton(AF_INET, listen.host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

std::optional<std::string> insecure_listener(const Listen& listen) {
    if (is_loopback(listen) || listen.tls == Listen::Tls::require || listen.insecure) return std::nullopt;
    return "listening on " + listen.host + " (not loopback) without TLS lets any host read and write every "
                                           "export: add tls: require (and a tls: section), or insecure: true to accept that";
}

namespace {

// The address a listener binds, in one spelling: listener.cpp binds
// "localhost" as 127.0.0.1, and "0:0::1" is "::1". A host name stays as written.
std::string bound_address(const std::string& host) {
    std::string h = host == "localhost" ? "127.0.0.1" : host;
    unsigned char addr[sizeof(in6_addr)];
    char text[INET6_ADDRSTRLEN];
    for (int family : {AF_INET, AF_INET6})
        if (inet_pton(family, h.c_str(), addr) == 1 && inet_ntop(family, addr, text, sizeof text)) return text;
    return h;
}

}   // namespace

bool same_socket_path(const std::string& a, const std::string& b) {
    return std::filesystem::path(a).lexically_normal() == std::filesystem::path(b).lexically_normal();
}

// [::] covers IPv4 as well: the listener leaves IPV6_V6ONLY off.
bool same_endpoint(const Listen& a, const Listen& b) {
    if (a.kind != b.kind) return false;
    if (a.kind == Listen::Kind::unix_socket) return same_socket_path(a.path, b.path);
    if (a.port != b.port) return false;
    auto x = bound_address(a.host), y = bound_address(b.host);
    auto covers = [](const std::string& wildcard, const std::string& other) {
        return wildcard == "::" || (wildcard == "0.0.0.0" && other.find(':') == std::string::npos);
    };
    return x == y || covers(x, y) || covers(y, x);
}

std::optional<Listen> parse_unix_listen(std::string_view path, std::string& error) {
    if (!detail::check_socket_path(path, error)) return std::nullopt;
    Listen listen;
    listen.kind = Listen::Kind::unix_socket;
    listen.path = std::string(path);
    return listen;
}

}   // namespace nbdsched::config

namespace nbdsched::config::detail {
namespace {

std::optional<Listen> parse_listen_entry(Reader& r, const Field& item) {
    std::optional<Listen> out;
    int kinds = 0;
    std::optional<Listen::Tls> tls;
    std::optional<bool> insecure;
    std::optional<Field> tls_at;
    Listen perms;   // mode/owner/group, whichever order the keys come in
    std::optional<Field> unix_only;
    bool ok = r.read_map(item, {"unix", "tcp", "tls", "insecure", "mode", "owner", "group"}, [&](const Field& f) {
        if (f.key == "tls") {
            tls_at = f;
            if (auto v = r.choice(f, {"off", "on", "require"}))
                tls = *v == "off" ? Listen::Tls::off : *v == "on" ? Listen::Tls::on
                                                                  : Listen::Tls::require;
            return;
        }
        if (f.key == "insecure") {
            insecure = r.boolean(f);
            return;
        }
        if (f.key == "mode" || f.key == "owner" || f.key == "group") {
            if (!unix_only) unix_only = f;
            if (f.key == "mode") perms.mode = read_mode(r, f);
            else (f.key == "owner" ? perms.owner : perms.group) = read_account(r, f, f.key == "group");
            return;
        }
        ++kinds;
        if (f.key == "tcp" && f.value.IsSequence())
            return r.error(f, "expected HOST:PORT; quote an IPv6 address, as in tcp: \"[::1]:10809\"");
        auto text = r.string(f);
        if (!text) return;
        std::string error;
        auto listen = f.key == "unix" ? parse_unix_listen(*text, error) : parse_tcp_listen(*text, error);
        if (!listen) return r.error(f, error);
        listen->origin = f.at;
        out = listen;
    });
    if (!ok) return std::nullopt;
    if (kinds != 1) {
        r.error(item.at, item.path, "each listen entry has exactly one of unix: PATH or tcp: HOST:PORT");
        return std::nullopt;
    }
    if (!out) return std::nullopt;
    if (unix_only && out->kind != Listen::Kind::unix_socket) {
        r.error(*unix_only, "mode, owner and group are for unix sockets (a TCP port has no file permissions)");
        return std::nullopt;
    }
    out->mode = perms.mode;
    out->owner = perms.owner;
    out->group = perms.group;
    if (tls) out->tls = *tls;
    if (insecure) out->insecure = *insecure;
    if (auto why = insecure_listener(*out)) {
        r.error(out->origin, item.path + ".tcp", *why);
        return std::nullopt;
    }
    return out;
}

// "unix PATH" or "tcp HOST:PORT" as written, for the duplicate-endpoint
// error (not describe(): in a unity build that hid reader.hpp's).
std::string endpoint_text(const Listen& l) {
    if (l.kind == Listen::Kind::unix_socket) return "unix " + l.path;
    return "tcp " + (l.host.find(':') != std::string::npos ? "[" + l.host + "]" : l.host) + ":" + std::to_string(l.port);
}

}   // namespace

std::vector<Listen> parse_listen(Reader& r, const Field& field) {
    std::vector<Listen> out;
    r.read_list(field, [&](const Field& item, std::size_t) {
        auto listen = parse_listen_entry(r, item);
        if (!listen) return;
        for (const auto& earlier : out) {
            if (same_endpoint(earlier, *listen)) {
                auto as = endpoint_text(earlier) == endpoint_text(*listen) ? "" : ", as " + endpoint_text(earlier);
                r.error(listen->origin, item.path, "listed twice (first at " + earlier.origin.str() + as + ")");
                return;
            }
        }
        out.push_back(*listen);
    });
    if (field.value.IsSequence() && field.value.size() == 0)
        r.error(field, "empty: give at least one unix: or tcp: entry, or remove the key for the defaults");
    return out;
}

}   // namespace nbdsched::config::detail
