#include "daemon/control/server.hpp"

#include <array>
#include <boost/asio/buffers_iterator.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <filesystem>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "daemon/session/private_socket.hpp"
#include "daemon/session/socket_file.hpp"

namespace nbdsched::daemon::control {

namespace local = boost::asio::local;

namespace {

// True when something answers on the socket file (another daemon).
bool socket_alive(boost::asio::io_context& io, const std::string& path) {
    local::stream_protocol::socket probe(io);
    boost::system::error_code ec;
    probe.connect(local::stream_protocol::endpoint(path), ec);
    return !ec;
}
}   // namespace

class ControlServer::Session : public std::enable_shared_from_this<Session> {
public:
    Session(local::stream_protocol::socket socket, Handler& handler, std::shared_ptr<bool> closed,
            std::shared_ptr<std::size_t> sessions, const Limits& limits, std::string path)
        : socket_(std::move(socket)), idle_(socket_.get_executor()), handler_(handler), closed_(std::move(closed)),
          sessions_(std::move(sessions)), limits_(limits), path_(std::move(path)), in_(limits.max_request) {
        ++*sessions_;
    }
    ~Session() { --*sessions_; }

    void read() {
        close_when_idle("sent no request");
        boost::asio::async_read_until(socket_, in_, '\n',
                                      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                          self->on_line(ec, n);
                                      });
    }

private:
    void on_line(const boost::system::error_code& ec, std::size_t n) {
        idle_.cancel();
        if (*closed_) return;
        if (ec == boost::asio::error::not_found) {   // no newline within max_request bytes
            spdlog::warn("control socket {}: a request longer than {} bytes: answered with an error and closed",
                         path_, limits_.max_request);
            const auto n = limits_.max_request;
            const auto size = n % (1u << 20) == 0 ? std::to_string(n >> 20) + " MiB" : std::to_string(n) + " bytes";
            reply_and_close(R"({"ok":false,"error":"request longer than )" + size + R"("})"
                                                                                    "\n");
            return;
        }
        if (ec) return;   // EOF, an idle close, or shutdown: drop the session
        std::string line(boost::asio::buffers_begin(in_.data()), boost::asio::buffers_begin(in_.data()) + n);
        in_.consume(n);
        out_ = handler_(line);
        close_when_idle("read no reply");   // a client that never reads its reply
        boost::asio::async_write(socket_, boost::asio::buffer(out_),
                                 [self = shared_from_this()](const boost::system::error_code& wec, std::size_t) {
                                     if (!wec) self->read();
                                 });
    }

    // Closes the socket (its pending read or write then fails, and drops the
    // session) unless it is re-armed or cancelled within the idle timeout.
    void close_when_idle(const char* what) {
        idle_.expires_after(limits_.idle_timeout);
        idle_.async_wait([weak = weak_from_this(), what](const boost::system::error_code& ec) {
            auto self = weak.lock();
            if (ec || !self) return;
            spdlog::info("control socket {}: closing a connection that {} for {} s", self->path_, what,
                         std::chrono::duration<double>(self->limits_.idle_timeout).count());
            boost::system::error_code ignored;
            self->socket_.close(ignored);
        });
    }

    void reply_and_close(std::string reply) {
        out_ = std::move(reply);
        boost::asio::async_write(socket_, boost::asio::buffer(out_),
                                 [self = shared_from_this()](const boost::system::error_code&, std::size_t) {
                                     boost::system::error_code ignored;
                                     // EOF after the reply; the rest of the request is read and dropped,
                                     // so a client still sending it reads the reply, not a broken pipe.
                                     self->socket_.shutdown(local::stream_protocol::socket::shutdown_send, ignored);
                                     self->drain();
                                 });
    }

    // Reads and drops what the client still sends (a few times the longest
    // request at most) until it closes, so that a client still sending is
    // not stopped by a broken pipe before it reads the reply.
    void drain() {
        close_when_idle("did not close after its error");
        socket_.async_read_some(boost::asio::buffer(scratch_),
                                [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                    self->idle_.cancel();
                                    self->drained_ += n;
                                    if (!ec && !*self->closed_ && self->drained_ <= 4 * self->limits_.max_request)
                                        self->drain();
                                });
    }

    local::stream_protocol::socket socket_;
    boost::asio::steady_timer idle_;
    Handler& handler_;
    std::shared_ptr<bool> closed_;
    std::shared_ptr<std::size_t> sessions_;
    const Limits limits_;
    const std::string path_;
    std::size_t drained_ = 0;
    boost::asio::streambuf in_;
    std::string out_;
    std::array<char, 65536> scratch_{};
};

ControlServer::ControlServer(boost::asio::io_context& io, std::string path, Handler handler, Limits limits)
    : acceptor_(io), path_(std::move(path)), handler_(std::move(handler)), limits_(limits),
      closed_(std::make_shared<bool>(false)),
      backoff_(io, "control socket " + path_) {}

ControlServer::~ControlServer() {
    close();
}

std::unique_ptr<ControlServer> ControlServer::open(boost::asio::io_context& io, const std::string& path,
                                                   Handler handler, std::string& error, Limits limits) {
    if (path.size() >= sizeof(sockaddr_un{}.sun_path)) {
        error = "control socket " + path + ": path too long";
        return nullptr;
    }
    if (auto why = not_a_socket(path); !why.empty()) {
        error = "control socket " + path + ": " + why;
        return nullptr;
    }
    std::error_code fs_ec;
    if (std::filesystem::is_socket(path, fs_ec)) {
        if (socket_alive(io, path)) {
            error = "control socket " + path + ": another process is listening on it";
            return nullptr;
        }
        std::filesystem::remove(path, fs_ec);
    }
    auto parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, fs_ec);
    std::unique_ptr<ControlServer> s(new ControlServer(io, path, std::move(handler), limits));
    boost::system::error_code ec;
    bind_private(s->acceptor_, path, ec);   // 0600 from the start
    if (!ec) s->bound_ = true;
    if (!ec) s->acceptor_.listen(boost::asio::socket_base::max_listen_connections, ec);
    if (ec) {
        error = "control socket " + path + ": " + ec.message();
        return nullptr;
    }
    return s;
}

void ControlServer::start() {
    spdlog::info("control socket {}", path_);
    accept_next();
}

void ControlServer::accept_next() {
    acceptor_.async_accept([this, closed = closed_](const boost::system::error_code& ec,
                                                    local::stream_protocol::socket socket) {
        if (*closed) return;
        if (!ec) {
            backoff_.accepted();
            if (*sessions_ >= limits_.max_sessions) {
                refuse(std::move(socket));
            } else {
                if (refused_) {
                    spdlog::info("control socket {}: accepting again after refusing {} connection(s)", path_, refused_);
                    refused_ = 0;
                }
                std::make_shared<Session>(std::move(socket), handler_, closed, sessions_, limits_, path_)->read();
            }
        } else if (backoff_.wait_after(ec, [this] { accept_next(); })) {
            return;
        } else {
            spdlog::warn("control socket {}: accept: {}", path_, ec.message());
        }
        accept_next();
    });
}

// One line saying why, written without waiting (a fresh socket's buffer
// takes it), then closed. Warned once until a connection is accepted again.
void ControlServer::refuse(local::stream_protocol::socket socket) {
    if (refused_++ == 0)
        spdlog::warn("control socket {}: {} connections are open, the most allowed: refusing more until one closes",
                     path_, limits_.max_sessions);
    const std::string reply = R"({"ok":false,"error":"too many control connections open (at most )" +
                              std::to_string(limits_.max_sessions) + R"(): try again later"})"
                                                                     "\n";
    boost::system::error_code ignored;
    socket.non_blocking(true, ignored);
    socket.send(boost::asio::buffer(reply), 0, ignored);
    socket.shutdown(local::stream_protocol::socket::shutdown_both, ignored);
}

void ControlServer::close() {
    if (*closed_) return;
    *closed_ = true;
    backoff_.cancel();
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    std::error_code fs_ec;
    if (bound_) std::filesystem::remove(path_, fs_ec);   // never a file a failed bind found there
}

}   // namespace nbdsched::daemon::control
