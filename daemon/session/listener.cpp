#include "daemon/session/listener.hpp"

#include <boost/asio/ip/address.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/session/socket_file.hpp"

namespace nbdsched::daemon {

namespace {

namespace asio = boost::asio;
using local = asio::local::stream_protocol;
using tcp = asio::ip::tcp;

// A socket file nobody answers on is left over from a crash: remove it. One
// somebody answers on belongs to a running server: refuse to steal it.
bool clear_stale_socket(const std::string& path, std::string& error) {
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) return true;   // nothing there
    if (auto why = not_a_socket(path); !why.empty()) {
        error = path + " " + why;
        return false;
    }
    asio::io_context probe_io;
    local::socket probe(probe_io);
    boost::system::error_code ec;
    probe.connect(local::endpoint(path), ec);
    if (!ec) {
        error = path + " is in use by another running server";
        return false;
    }
    if (::unlink(path.c_str()) != 0) {
        error = "cannot remove stale socket " + path + ": " + std::strerror(errno);
        return false;
    }
    spdlog::info("removed stale unix socket {}", path);
    return true;
}

// listen: mode/owner/group on the socket file; unset ones stay as bind() left them.
// The mode first, while the file is still ours: after a chown to another
// owner, chmod would need CAP_FOWNER, and the systemd unit grants only
// CAP_CHOWN.
bool set_permissions(const config::Listen& where, std::string& error) {
    const char* path = where.path.c_str();
    if (where.mode && ::chmod(path, *where.mode) != 0) {
        error = "cannot set the mode of unix socket " + where.path + ": " + std::strerror(errno);
        return false;
    }
    if (where.owner || where.group) {
        uid_t uid = where.owner ? *where.owner : static_cast<uid_t>(-1);
        gid_t gid = where.group ? *where.group : static_cast<gid_t>(-1);
        if (::chown(path, uid, gid) != 0) {
            error = "cannot set the owner of unix socket " + where.path + ": " + std::strerror(errno);
            return false;
        }
    }
    return true;
}

// A 1 MiB reply into the default send buffer (208 KiB on a Unix socket,
// 16 KiB growing on TCP) left in pieces, each after an epoll_wait: ask for
// room for two large replies at once (the kernel doubles the 1 MiB asked
// for its bookkeeping, and caps it at net.core.wmem_max). Not more: with
// 4 MiB asked (8 MiB of queue) what a client read had been copied into the
// socket a whole batch of replies earlier and was out of the cache by then,
// and the copies on both sides cost more: 1 MiB reads at qd8 over a Unix
// socket took 228 µs of the daemon's CPU and 193 of fio's per read, with
// 1 MiB 148 and 125 (docs/data-path.md, "The send buffer's size"). A
// limit, not memory an idle connection holds.
void widen_send_buffer(int fd) {
    constexpr int send_buffer = 1 << 20;
    ::setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
}

// A TCP client whose host dies while idle is written nothing, so nothing
// would notice: keepalive probes after 60 s of silence, 6 of them 10 s apart,
// drop it within about 2 minutes and free its slot and queue (nbdkit turns
// SO_KEEPALIVE on as well, with the kernel's 2-hour default).
void keep_alive(int fd) {
    constexpr int on = 1, idle_s = 60, interval_s = 10, probes = 6;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle_s, sizeof idle_s);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval_s, sizeof interval_s);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
}

// Both ends on this host (a loopback address, or the peer is our own
// address: the kernel routes that through lo as well).
bool same_host(const tcp::socket& s) {
    boost::system::error_code ec;
    const auto peer = s.remote_endpoint(ec).address();
    if (ec) return false;
    const auto local = s.local_endpoint(ec).address();
    if (ec) return false;
    auto loopback = [](const asio::ip::address& a) {
        return a.is_loopback() || (a.is_v6() && a.to_v6().is_v4_mapped() &&
                                   a.to_v6().to_v4().is_loopback());   // ::ffff:127.0.0.1
    };
    return loopback(peer) || peer == local;
}

// A client on this host gets replies from a socket that does not pace. BBR
// (the kernel's default here and on many hosts) paces with a timer: over
// loopback (no fq qdisc) the timer fires on whatever CPU, mostly the
// client's, and sends the reply from there while the daemon's own sendmsg
// sends the next from its CPU; each CPU's segments reach the client's
// socket through its own backlog, out of order, and are retransmitted for
// nothing. The client pays for sending the server's data (fio, 1 MiB READs
// at queue depth 8 over 127.0.0.1: a quarter of the daemon socket's sends
// ran in fio's context under the pacing timer, 1% with cubic; 244-1,846
// segments retransmitted per 2 s run against 11-209). There is no network to
// share on loopback, so nothing is lost by not pacing (docs/data-path.md).
// cubic needs CAP_NET_ADMIN where net.ipv4.tcp_allowed_congestion_control
// does not list it; reno is always allowed.
void unpaced_on_this_host(tcp::socket& s) {
    if (!same_host(s)) return;
    const int fd = s.native_handle();
    char current[16] = {};
    socklen_t len = sizeof current;
    if (::getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, current, &len) != 0 || std::strncmp(current, "bbr", 3) != 0)
        return;
    for (const char* name : {"cubic", "reno"})
        if (::setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, std::strlen(name)) == 0) return;
}

std::string peer_of(const Socket& s) {
    boost::system::error_code ec;
    auto ep = s.remote_endpoint(ec);
    if (ec) return "?";
    if (ep.protocol().family() == AF_UNIX) {
        // The peer's process, for logs (and, later, classification rules).
        ucred cred{};
        socklen_t len = sizeof cred;
        auto fd = const_cast<Socket&>(s).native_handle();
        if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
            return "unix pid " + std::to_string(cred.pid) + " uid " + std::to_string(cred.uid);
        return "unix";
    }
    if (ep.protocol().family() == AF_INET || ep.protocol().family() == AF_INET6) {
        tcp::endpoint t;
        std::memcpy(t.data(), ep.data(), std::min<std::size_t>(ep.size(), sizeof(sockaddr_in6)));
        t.resize(ep.size());
        return t.address().to_string() + ":" + std::to_string(t.port());
    }
    return "?";
}

}   // namespace

nbd::TlsMode tls_mode_of(const config::Listen& where) {
    return where.tls == config::Listen::Tls::require ? nbd::TlsMode::require
           : where.tls == config::Listen::Tls::on    ? nbd::TlsMode::on
                                                     : nbd::TlsMode::off;
}

Listener::Listener(asio::io_context& io) : io_(io), backoff_(io, "listener") {}

Listener::~Listener() { close(); }

std::unique_ptr<Listener> Listener::open(asio::io_context& io, const config::Listen& where, std::string& error) {
    // Asio throws where the C calls only fail (an endpoint's path longer than
    // sockaddr_un holds): a listener that cannot open is an error, not an abort.
    try {
        return open_or_throw(io, where, error);
    } catch (const std::exception& e) {
        const bool unix_socket = where.kind == config::Listen::Kind::unix_socket;
        error = "cannot listen on " + (unix_socket ? "unix socket " + where.path : "tcp " + where.host) + ": " + e.what();
        return nullptr;
    }
}

std::unique_ptr<Listener> Listener::open_or_throw(asio::io_context& io, const config::Listen& where,
                                                  std::string& error) {
    std::unique_ptr<Listener> l(new Listener(io));
    l->tls_mode_ = tls_mode_of(where);
    boost::system::error_code ec;
    if (where.kind == config::Listen::Kind::unix_socket) {
        const auto& path = where.path;
        if (path.size() >= sizeof(sockaddr_un::sun_path)) {   // before its directory is made
            error = "cannot listen on unix socket " + path + ": longer than " +
                    std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
            return nullptr;
        }
        auto parent = std::filesystem::path(path).parent_path();
        std::error_code fs_ec;   // a missing directory shows up as a bind error below
        if (!parent.empty()) std::filesystem::create_directories(parent, fs_ec);
        if (!clear_stale_socket(path, error)) return nullptr;
        l->unix_.emplace(io);
        l->unix_->open(local(), ec);
        if (!ec) l->unix_->bind(local::endpoint(path), ec);
        // Before listen(): nobody can connect while the file still has bind()'s mode.
        if (!ec && !set_permissions(where, error)) {
            ::unlink(path.c_str());
            return nullptr;
        }
        if (!ec) l->unix_->listen(asio::socket_base::max_listen_connections, ec);
        if (ec) {
            error = "cannot listen on unix socket " + path + ": " + ec.message();
            return nullptr;
        }
        l->path_ = path;
        l->owns_path_ = true;
        l->description_ = "unix:" + path;
        return l;
    }
    std::string host = where.host;
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
    auto address = asio::ip::make_address(host == "localhost" ? "127.0.0.1" : host, ec);
    if (ec) {
        error = "bad listen address '" + where.host + "': " + ec.message();
        return nullptr;
    }
    tcp::endpoint endpoint(address, where.port);
    l->tcp_.emplace(io);
    l->tcp_->open(endpoint.protocol(), ec);
    if (!ec) l->tcp_->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) l->tcp_->bind(endpoint, ec);
    if (!ec) l->tcp_->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
        error = "cannot listen on tcp " + endpoint.address().to_string() + ":" + std::to_string(where.port) + ": " +
                ec.message();
        return nullptr;
    }
    l->host_ = endpoint.address().to_string();
    l->port_ = l->tcp_->local_endpoint().port();
    l->description_ = "tcp:" + (address.is_v6() ? "[" + l->host_ + "]" : l->host_) + ":" + std::to_string(l->port_);
    return l;
}

std::unique_ptr<Listener> Listener::adopt(asio::io_context& io, int fd, std::string& error, const std::string& origin) {
    std::unique_ptr<Listener> l(new Listener(io));
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
        error = origin + " socket: fd " + std::to_string(fd) + ": " + std::strerror(errno);
        return nullptr;
    }
    boost::system::error_code ec;
    if (ss.ss_family == AF_UNIX) {
        l->unix_.emplace(io);
        l->unix_->assign(local(), fd, ec);
        l->path_ = reinterpret_cast<sockaddr_un*>(&ss)->sun_path;
        l->description_ = "unix:" + l->path_ + " (" + origin + ")";
    } else if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
        l->tcp_.emplace(io);
        l->tcp_->assign(ss.ss_family == AF_INET ? tcp::v4() : tcp::v6(), fd, ec);
        if (!ec) {
            auto ep = l->tcp_->local_endpoint(ec);
            l->host_ = ep.address().to_string();
            l->port_ = ep.port();
        }
        l->description_ = "tcp:" + l->host_ + ":" + std::to_string(l->port_) + " (" + origin + ")";
    } else {
        error = origin + " socket: fd " + std::to_string(fd) + " is neither unix nor tcp";
        return nullptr;
    }
    if (ec) {
        error = origin + " socket: fd " + std::to_string(fd) + ": " + ec.message();
        return nullptr;
    }
    return l;
}

config::Listen Listener::as_listen() const {
    config::Listen e;
    e.kind = is_unix() ? config::Listen::Kind::unix_socket : config::Listen::Kind::tcp;
    e.path = path_;
    e.host = host_;
    e.port = port_;
    e.tls = tls_mode_ == nbd::TlsMode::require ? config::Listen::Tls::require
            : tls_mode_ == nbd::TlsMode::on    ? config::Listen::Tls::on
                                               : config::Listen::Tls::off;
    return e;
}

bool Listener::apply_permissions(const config::Listen& where, std::string& error) const {
    return set_permissions(where, error);
}

void Listener::start(Accept on_accept) {
    on_accept_ = std::move(on_accept);
    backoff_.set_what(description_);
    accept_next();
}

void Listener::pause() {
    if (closed_ || paused_) return;
    paused_ = true;
    backoff_.cancel();
    boost::system::error_code ignored;
    if (unix_) unix_->cancel(ignored);
    if (tcp_) tcp_->cancel(ignored);
}

void Listener::resume_accepting() {
    if (closed_ || !paused_) return;
    paused_ = false;
    accept_next();
}

int Listener::native_handle() {
    return unix_ ? unix_->native_handle() : tcp_->native_handle();
}

void Listener::accept_next() {
    if (closed_ || paused_) return;
    auto deliver = [this](auto& accepted, const auto& protocol) {
        boost::system::error_code ec;
        Socket socket(io_);
        socket.assign(protocol, accepted.release(), ec);
        if (ec) {
            spdlog::warn("{}: cannot adopt accepted socket: {}", description_, ec.message());
            return;
        }
        backoff_.accepted();
        widen_send_buffer(socket.native_handle());
        ++accepted_;
        auto peer = peer_of(socket);
        on_accept_(std::move(socket), std::move(peer));
    };
    // True: accept again now (an error about this one connection, e.g. a
    // peer gone before it was accepted). Out of descriptors or memory, the
    // back-off accepts again later.
    auto on_error = [this](const boost::system::error_code& ec) {
        if (ec == asio::error::operation_aborted || closed_ || paused_) return false;
        if (backoff_.wait_after(ec, [this] { accept_next(); })) return false;
        spdlog::warn("{}: accept: {}", description_, ec.message());
        return true;
    };
    if (unix_) {
        unix_->async_accept([this, deliver, on_error](const boost::system::error_code& ec, local::socket s) {
            if (ec) {
                if (on_error(ec)) accept_next();
                return;
            }
            deliver(s, asio::generic::stream_protocol(AF_UNIX, 0));
            accept_next();
        });
    } else {
        tcp_->async_accept([this, deliver, on_error](const boost::system::error_code& ec, tcp::socket s) {
            if (ec) {
                if (on_error(ec)) accept_next();
                return;
            }
            boost::system::error_code ignored;
            s.set_option(tcp::no_delay(true), ignored);
            keep_alive(s.native_handle());
            unpaced_on_this_host(s);
            auto family = s.local_endpoint(ignored).protocol().family();
            deliver(s, asio::generic::stream_protocol(family, IPPROTO_TCP));
            accept_next();
        });
    }
}

void Listener::close() {
    if (closed_) return;
    closed_ = true;
    backoff_.cancel();
    boost::system::error_code ignored;
    if (unix_) unix_->close(ignored);
    if (tcp_) tcp_->close(ignored);
    if (owns_path_) ::unlink(path_.c_str());
}

std::string Listener::uri(const std::string& export_name) const {
    if (unix_) return "nbd+unix:///" + export_name + "?socket=" + path_;
    std::string host = host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_;
    return "nbd://" + host + ":" + std::to_string(port_) + "/" + export_name;
}

}   // namespace nbdsched::daemon
