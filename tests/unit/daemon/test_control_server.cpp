// daemon/control/server: how many control connections stay open, for how
// long an idle one does, and the answer to a request that is too long. Real
// Unix sockets on one io_context, with small limits so it runs quickly.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/control/server.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::daemon::control;
using namespace std::chrono_literals;

namespace {

struct Client {
    int fd = -1;
    explicit Client(const std::string& path) {
        fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        path.copy(addr.sun_path, sizeof addr.sun_path - 1);
        REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    }
    ~Client() { ::close(fd); }
    void send(const std::string& data) const {
        for (std::size_t done = 0; done < data.size();) {
            auto n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
            REQUIRE(n > 0);
            done += static_cast<std::size_t>(n);
        }
    }
    // What has arrived, and whether the server closed (EOF), running `io` meanwhile.
    std::string read(boost::asio::io_context& io, bool& eof, std::chrono::milliseconds wait = 500ms) const {
        std::string got;
        eof = false;
        auto until = std::chrono::steady_clock::now() + wait;
        while (std::chrono::steady_clock::now() < until && !eof) {
            io.run_for(5ms);
            pollfd p{fd, POLLIN, 0};
            while (!eof && ::poll(&p, 1, 0) > 0) {
                char buf[4096];
                auto n = ::recv(fd, buf, sizeof buf, 0);
                if (n <= 0)
                    eof = true;
                else
                    got.append(buf, static_cast<std::size_t>(n));
            }
        }
        return got;
    }
};

struct Fixture {
    boost::asio::io_context io;
    nbdsched::testlib::TempDir dir;
    std::string path = dir.file("ctl.sock");
    std::unique_ptr<ControlServer> server;
    explicit Fixture(ControlLimits limits) {
        std::string error;
        server = ControlServer::open(
            io, path, [](const std::string& line) { return "echo " + line; }, error, limits);
        REQUIRE(server);
        server->start();
    }
};

}   // namespace

TEST_CASE("connections over the cap get an error line and are closed; the others are served") {
    Fixture f(ControlLimits{2, 10s, 1024});
    Client a(f.path), b(f.path);
    bool eof = false;
    CHECK(a.read(f.io, eof, 100ms).empty());   // accepted
    Client c(f.path);
    auto refused = c.read(f.io, eof);
    CHECK(eof);
    CHECK(refused == R"({"ok":false,"error":"too many control connections open (at most 2): try again later"})"
                     "\n");
    a.send("x\n");
    CHECK(a.read(f.io, eof, 200ms) == "echo x\n");
    CHECK_FALSE(eof);
    ::close(b.fd);   // one closes: room for another
    b.fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    f.io.run_for(50ms);
    Client d(f.path);
    d.send("y\n");
    CHECK(d.read(f.io, eof, 200ms) == "echo y\n");
}

TEST_CASE("an idle connection is closed after the idle timeout, a busy one is not") {
    Fixture f(ControlLimits{8, 1000ms, 1024});
    Client idle(f.path), busy(f.path);
    bool eof = false;
    for (int i = 0; i < 8; ++i) {   // 8 x 150 ms: longer than the timeout in all, never idle that long
        busy.send("x\n");
        CHECK(busy.read(f.io, eof, 150ms) == "echo x\n");
        CHECK_FALSE(eof);
    }
    idle.read(f.io, eof, 3s);
    CHECK(eof);
    busy.read(f.io, eof, 3s);
    CHECK(eof);   // idle in its turn
}

TEST_CASE("a request longer than the limit gets an error line, then EOF") {
    Fixture f(ControlLimits{8, 10s, 1024});
    Client c(f.path);
    c.send(std::string(3000, 'x'));   // no newline, and more than the limit
    bool eof = false;
    auto got = c.read(f.io, eof);
    CHECK(got == R"({"ok":false,"error":"request longer than 1024 bytes"})"
                 "\n");
    ::shutdown(c.fd, SHUT_WR);
    c.read(f.io, eof);
    CHECK(eof);
}
