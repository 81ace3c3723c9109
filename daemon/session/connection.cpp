#include "daemon/session/connection.hpp"

#include <algorithm>
#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <linux/sockios.h>

#include "common/units.hpp"

namespace nbdsched::daemon {

Connection::Connection(Socket socket, std::uint64_t id, std::string peer, PeerInfo identity,
                       const ConnectionContext& context, nbd::TlsMode tls_mode)
    : socket_(std::move(socket)),
      id_(id),
      peer_(std::move(peer)),
      identity_(std::move(identity)),
      context_(context),
      handshake_timer_(socket_.get_executor()) {
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    tcp_ = ::getsockname(socket_.native_handle(), reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
           local.ss_family != AF_UNIX;
    negotiation_.max_options = context_.limits.max_handshake_options;
    negotiation_.tls = context_.tls ? tls_mode : nbd::TlsMode::off;
    // Safe to capture `this`: negotiation_ is ours and only our handlers use it.
    negotiation_.may_open = [this](const nbd::ExportInfo& info) { return may_open(info); };
}

// Runs only when no handler and no device holds the connection any more;
// the device may already be gone at shutdown, so nothing here touches it.
Connection::~Connection() = default;

bool adopt_socket(boost::asio::io_context& io, int fd, Socket& into, boost::system::error_code& ec) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    const int protocol = ss.ss_family == AF_UNIX ? 0 : IPPROTO_TCP;
    Socket socket(io);
    socket.assign(boost::asio::generic::stream_protocol(ss.ss_family, protocol), fd, ec);
    if (ec) return false;
    into = std::move(socket);
    return true;
}

std::string Connection::tag() const {
    return "conn " + std::to_string(id_) + " (" + peer_ + ")";
}

namespace {
// Once the server stops, how long a client still in the handshake has to
// send the option that is answered NBD_REP_ERR_SHUTDOWN: a client between
// two options sends the next at once, an idle one must not hold the stop up.
constexpr auto shutdown_option_wait = std::chrono::seconds(1);
}   // namespace

void Connection::start() {
    spdlog::debug("{}: connected", tag());
    watch_handshake(std::chrono::steady_clock::now() + context_.limits.handshake_timeout);
    send_greeting();
}

// A client that never finishes the handshake (the TLS one included) must
// not hold a connection slot beyond limits.handshake_timeout, nor a stop
// beyond shutdown_option_wait.
void Connection::watch_handshake(std::chrono::steady_clock::time_point until) {
    handshake_timer_.expires_at(until);
    handshake_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec || self->in_transmission()) return;
        if (self->hs_held_)   // the client waits for a hand-over's outcome: not its delay
            return self->watch_handshake(std::chrono::steady_clock::now() + self->context_.limits.handshake_timeout);
        if (self->negotiation_.shutting_down)
            return self->close("server shutting down during the handshake (no option came within " +
                               format_duration(shutdown_option_wait) + ")");
        self->close("handshake not finished within " + format_duration(self->context_.limits.handshake_timeout),
                    spdlog::level::warn);
    });
}

void Connection::shutdown() {
    if (closed_) return;
    if (!in_transmission()) {
        // The NBD spec's way to end a negotiation the server will not go on
        // with: the client's next option is answered NBD_REP_ERR_SHUTDOWN
        // (nbd::handle_option), then the connection closes.
        if (negotiation_.shutting_down) return;
        negotiation_.shutting_down = true;
        if (!tls_ending_)   // the TLS goodbye has its own short timer
            watch_handshake(std::min(handshake_timer_.expiry(), std::chrono::steady_clock::now() + shutdown_option_wait));
        release_handshake();   // an option held for a hand-over is answered so now
        return;
    }
    // No request past the next boundary: a WRITE whose payload is being
    // read is read whole and performed (parse() stops after it). The socket's
    // receiving half stays open: a shutdown(SHUT_RD) there made a unix
    // client's next send fail with EPIPE, and the client then dropped the
    // replies still on their way (linger()).
    draining_ = true;
    if (rstate_ == ReadState::header) stop_reading_ = true;
    maybe_finish();
}

namespace {
// After the last reply of a graceful stop, how long the client may take to
// read them and hang up before the socket closes anyway.
constexpr auto linger_limit = std::chrono::seconds(1);
constexpr auto linger_poll = std::chrono::milliseconds(10);

// Bytes written to a unix socket that its peer has not read yet; -1 for
// other sockets (TCP's count is of bytes not acknowledged, not of bytes not read).
int unread_by_peer(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    int queued = 0;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0 || ss.ss_family != AF_UNIX) return -1;
    return ::ioctl(fd, SIOCOUTQ, &queued) == 0 ? queued : -1;
}
}   // namespace

// A graceful stop's last step, every reply written: the sending half closes
// (the client reads its replies, then EOF) and what the client still sends
// is read and dropped. A close() with unread bytes in the socket would make
// the client's next send fail (EPIPE on a unix socket, a reset over TCP),
// and clients such as libnbd then fail every request in flight, the ones
// whose replies wait in their socket included. True once the socket may
// close: the client hung up, read everything (unix), or linger_limit passed.
bool Connection::linger() {
    if (peer_gone_) return true;
    if (!lingering_) {
        lingering_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(Socket::shutdown_send, ignored);
        watch_linger(std::chrono::steady_clock::now() + linger_limit);
    }
    if (!reading_) discard_read();
    return false;
}

void Connection::discard_read() {
    reading_ = true;
    socket_.async_read_some(boost::asio::buffer(small_),
                            in_slot(*read_slot_, [self = shared_from_this()](const boost::system::error_code& ec,
                                                                             std::size_t n) {
                                self->reading_ = false;
                                if (ec || n == 0) self->peer_gone_ = true;   // EOF, or the linger ended
                                self->maybe_finish();
                            }));
}

boost::asio::steady_timer& Connection::socket_timer() {
    if (device_ == nullptr) return handshake_timer_;
    // Made here, not at the move: linger() may run on loop 0 inside
    // exclusive() (shutdown()), which is safe for a timer of the paused
    // device loop; its handler then runs on that loop.
    return closing_timer_.on(socket_.get_executor());
}

void Connection::watch_linger(std::chrono::steady_clock::time_point until) {
    auto& timer = socket_timer();
    timer.expires_after(linger_poll);
    timer.async_wait([self = shared_from_this(), until](const boost::system::error_code& ec) {
        if (ec || self->closed_ || self->peer_gone_) return;
        if (unread_by_peer(self->socket_.native_handle()) != 0 && std::chrono::steady_clock::now() < until)
            return self->watch_linger(until);
        self->peer_gone_ = true;
        boost::system::error_code ignored;
        self->socket_.cancel(ignored);   // the discard read comes back through maybe_finish
    });
}

void Connection::close(const std::string& reason, spdlog::level::level_enum level) {
    if (closed_) return;
    if (!reason.empty()) spdlog::log(level, "{}: closing: {}", tag(), reason);
    handshake_timer_.cancel();
    closing_timer_.cancel();
    closed_ = true;
    stop_reading_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
    // Replies nobody will read: drop them now. The batch being written comes
    // back through on_written with an error and is released there.
    for (auto* r : pending_) release(*r);
    pending_.clear();
    if (current_) {
        release(*current_);
        current_ = nullptr;
    }
    // Requests still at the device: their reads need not run (the device
    // answers one not dispatched yet at once, unread); the writes, flushes,
    // trims and zeroes run, as a client may have sent them before it closed
    // without waiting for their replies (none was acknowledged, so
    // dropping them would be allowed too, but running them surprises no one).
    for (auto& r : all_) r->abandoned = true;
    maybe_finish();
}

}   // namespace nbdsched::daemon
