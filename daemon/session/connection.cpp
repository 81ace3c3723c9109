#include "daemon/session/connection.hpp"

#include <netinet/in.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>

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

void Connection::start() {
    spdlog::debug("{}: connected", tag());
    // A client that never finishes the handshake (the TLS one included)
    // must not hold a connection slot beyond limits.handshake_timeout.
    handshake_timer_.expires_after(context_.limits.handshake_timeout);
    handshake_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
        if (ec || self->in_transmission()) return;
        self->close("handshake not finished within " + format_duration(self->context_.limits.handshake_timeout),
                    spdlog::level::warn);
    });
    send_greeting();
}

void Connection::shutdown() {
    if (closed_) return;
    if (!in_transmission()) {
        close("server shutting down during the handshake");
        return;
    }
    stop_reading_ = true;
    // Wakes the pending read (it completes with EOF) without cancelling the
    // replies being written. Not under TLS: an EOF there is a fatal TLS
    // error that leaves no close_notify to send; maybe_finish() cancels that
    // read once the replies are out.
    if (!tls_active()) {
        boost::system::error_code ignored;
        socket_.shutdown(Socket::shutdown_receive, ignored);
    }
    maybe_finish();
}

void Connection::close(const std::string& reason, spdlog::level::level_enum level) {
    if (closed_) return;
    if (!reason.empty()) spdlog::log(level, "{}: closing: {}", tag(), reason);
    handshake_timer_.cancel();
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
    maybe_finish();
}

}   // namespace nbdsched::daemon
