#include "daemon/control/server.hpp"

#include <boost/asio/buffers_iterator.hpp>
#include <boost/asio/read_until.hpp>
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
constexpr std::size_t max_request = 1u << 20;

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
    Session(local::stream_protocol::socket socket, Handler& handler, std::shared_ptr<bool> closed)
        : socket_(std::move(socket)), handler_(handler), closed_(std::move(closed)), in_(max_request) {}

    void read() {
        boost::asio::async_read_until(socket_, in_, '\n',
                                      [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
                                          self->on_line(ec, n);
                                      });
    }

private:
    void on_line(const boost::system::error_code& ec, std::size_t n) {
        if (ec || *closed_) return;   // EOF, an over-long line, or shutdown: drop the session
        std::string line(boost::asio::buffers_begin(in_.data()), boost::asio::buffers_begin(in_.data()) + n);
        in_.consume(n);
        out_ = handler_(line);
        boost::asio::async_write(socket_, boost::asio::buffer(out_),
                                 [self = shared_from_this()](const boost::system::error_code& wec, std::size_t) {
                                     if (!wec) self->read();
                                 });
    }

    local::stream_protocol::socket socket_;
    Handler& handler_;
    std::shared_ptr<bool> closed_;
    boost::asio::streambuf in_;
    std::string out_;
};

ControlServer::ControlServer(boost::asio::io_context& io, std::string path, Handler handler)
    : acceptor_(io), path_(std::move(path)), handler_(std::move(handler)), closed_(std::make_shared<bool>(false)),
      backoff_(io, "control socket " + path_) {}

ControlServer::~ControlServer() {
    close();
}

std::unique_ptr<ControlServer> ControlServer::open(boost::asio::io_context& io, const std::string& path,
                                                   Handler handler, std::string& error) {
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
    std::unique_ptr<ControlServer> s(new ControlServer(io, path, std::move(handler)));
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
            std::make_shared<Session>(std::move(socket), handler_, closed)->read();
        } else if (backoff_.wait_after(ec, [this] { accept_next(); })) {
            return;
        } else {
            spdlog::warn("control socket {}: accept: {}", path_, ec.message());
        }
        accept_next();
    });
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
