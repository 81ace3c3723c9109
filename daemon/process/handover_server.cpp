#include "daemon/process/handover_server.hpp"

#include <filesystem>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <utility>

#include "daemon/process/handover_wire.hpp"
#include "daemon/session/private_socket.hpp"
#include "daemon/session/socket_file.hpp"
#include "kernel/connect.hpp"

namespace nbdsched::daemon {

namespace {
using local = boost::asio::local::stream_protocol;
// The new process sends its request as soon as it connects, and its verdict
// once its server is built (opening backends: well under this).
constexpr std::chrono::milliseconds request_wait{2000};
constexpr std::chrono::milliseconds verdict_wait{10000};
}   // namespace

HandoverServer::HandoverServer(boost::asio::io_context& io, std::string path, Hooks hooks)
    : acceptor_(io), timer_(io), backoff_(io, "hand-over socket"), path_(std::move(path)), hooks_(std::move(hooks)) {}

HandoverServer::~HandoverServer() { close(keep_file_); }

std::unique_ptr<HandoverServer> HandoverServer::open(boost::asio::io_context& io, const std::string& path,
                                                     bool replace, Hooks hooks, std::string& error) {
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
        error = "hand-over socket " + path + ": path too long";
        return nullptr;
    }
    if (auto why = not_a_socket(path); !why.empty()) {
        error = "hand-over socket " + path + ": " + why;
        return nullptr;
    }
    std::error_code fs_ec;
    if (std::filesystem::is_socket(path, fs_ec)) {
        local::socket probe(io);
        boost::system::error_code ec;
        probe.connect(local::endpoint(path), ec);
        if (!ec && !replace) {
            error = "hand-over socket " + path + ": a daemon is serving there (take over with --takeover " + path + ")";
            return nullptr;
        }
        std::filesystem::remove(path, fs_ec);
    }
    std::unique_ptr<HandoverServer> s(new HandoverServer(io, path, std::move(hooks)));
    boost::system::error_code ec;
    bind_private(s->acceptor_, path, ec);   // whoever connects gets every socket: the owner only
    if (!ec) s->bound_ = true;
    if (!ec) s->acceptor_.listen(4, ec);
    if (ec) {
        error = "hand-over socket " + path + ": " + ec.message();
        return nullptr;
    }
    return s;
}

void HandoverServer::start() { accept_next(); }

void HandoverServer::accept_next() {
    acceptor_.async_accept([this](const boost::system::error_code& ec, local::socket s) {
        if (ec == boost::asio::error::operation_aborted || closed_) return;
        if (ec) {
            if (backoff_.wait_after(ec, [this] { accept_next(); })) return;
            // Left: errors about one connection, gone with it (accept_backoff.cpp): no spin.
            spdlog::warn("hand-over socket: accept: {}", ec.message());
            return accept_next();
        }
        backoff_.accepted();
        if (peer_) {   // one hand-over at a time
            std::string ignored;
            send_handover(s.native_handle(), "refused a hand-over is already in progress", {}, ignored);
        } else {
            peer_.emplace(std::move(s));
            when_readable(request_wait, [this](bool readable) {
                if (!readable) return end_peer();
                on_request();
            });
        }
        accept_next();
    });
}

void HandoverServer::when_readable(std::chrono::milliseconds limit, std::function<void(bool)> then) {
    timer_.expires_after(limit);
    timer_.async_wait([this](const boost::system::error_code& ec) {
        if (!ec && peer_) peer_->cancel();
    });
    peer_->async_wait(local::socket::wait_read,
                      [this, then = std::move(then), peer = generation_](const boost::system::error_code& ec) {
                          if (closed_ || peer != generation_) return;   // that peer is gone already
                          timer_.cancel();
                          // async_wait made the socket non-blocking; the frame's parts may
                          // still be on their way, and SO_RCVTIMEO bounds the wait for them.
                          boost::system::error_code ignored;
                          peer_->native_non_blocking(false, ignored);
                          then(!ec);
                      });
}

void HandoverServer::on_request() {
    std::string error;
    kernel::set_io_timeouts(peer_->native_handle(), request_wait);
    auto m = recv_handover(peer_->native_handle(), error);
    if (m) close_fds(m->fds);   // a request carries none
    if (!m || (m->text != "takeover" && m->text != "takeover force")) {
        spdlog::warn("hand-over socket: {}", m ? "unknown request '" + m->text + "'" : error);
        return end_peer();
    }
    spdlog::info("hand-over: a new process asks for everything{}", m->text == "takeover force" ? " (--force)" : "");
    auto why = hooks_.begin(m->text == "takeover force");
    if (!why.empty()) {
        spdlog::warn("hand-over refused: {}", why);
        send_handover(peer_->native_handle(), "refused " + why, {}, error);
        return end_peer();
    }
}

void HandoverServer::send_state(const std::string& json, const std::vector<int>& fds) {
    std::string error;
    if (!peer_) return hooks_.abort("the new process went away");
    kernel::set_io_timeouts(peer_->native_handle(), verdict_wait);
    if (!send_handover(peer_->native_handle(), "state " + json, fds, error)) {
        end_peer();
        return hooks_.abort(error);
    }
    wait_verdict();
}

void HandoverServer::wait_verdict() {
    when_readable(verdict_wait, [this](bool readable) {
        std::string error = "no answer from the new process within " + std::to_string(verdict_wait.count()) + " ms";
        std::optional<HandoverMessage> m;
        if (readable) m = recv_handover(peer_->native_handle(), error);
        if (m) close_fds(m->fds);   // a verdict carries none
        if (m && m->text == "adopted" && send_handover(peer_->native_handle(), "bye", {}, error)) {
            end_peer();
            return hooks_.done();
        }
        if (m) error = m->text.rfind("failed ", 0) == 0 ? m->text.substr(7) : "unexpected '" + m->text + "'";
        end_peer();
        hooks_.abort(error);
    });
}

void HandoverServer::fail(const std::string& why) {
    if (!peer_) return;
    std::string ignored;
    send_handover(peer_->native_handle(), "refused " + why, {}, ignored);
    end_peer();
}

void HandoverServer::end_peer() {
    if (!peer_) return;
    boost::system::error_code ignored;
    peer_->close(ignored);
    peer_.reset();
    ++generation_;
}

void HandoverServer::close(bool keep_file) {
    if (closed_) return;
    closed_ = true;
    keep_file_ = keep_file;
    boost::system::error_code ignored;
    timer_.cancel();
    backoff_.cancel();
    acceptor_.close(ignored);
    end_peer();
    if (!keep_file && bound_) ::unlink(path_.c_str());   // never a file a failed bind found there
}

}   // namespace nbdsched::daemon
