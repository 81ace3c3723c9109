// daemon/systemd_notify: the messages on a NOTIFY_SOCKET datagram socket and
// the sockets taken over from $LISTEN_FDS, exercised without systemd.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "daemon/process/systemd_notify.hpp"

using namespace nbdsched::daemon;

namespace {

sockaddr_un unix_addr(const std::string& path) {
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    return a;
}

std::string temp_path(const char* tag) {
    return "/tmp/nbdsched-test-" + std::string(tag) + "-" + std::to_string(getpid());
}

// A datagram socket standing in for systemd's notification socket.
struct NotifyListener {
    std::string path = temp_path("notify");
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    NotifyListener() {
        unlink(path.c_str());
        auto a = unix_addr(path);
        REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
        setenv("NOTIFY_SOCKET", path.c_str(), 1);
    }
    ~NotifyListener() {
        unsetenv("NOTIFY_SOCKET");
        close(fd);
        unlink(path.c_str());
    }
    std::string next() {
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 2000) != 1) return "<timeout>";
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        return n < 0 ? "<error>" : std::string(buf, static_cast<std::size_t>(n));
    }
};

int listening(int family, int type, const sockaddr* addr, socklen_t len) {
    int fd = socket(family, type, 0);
    REQUIRE(fd >= 0);
    REQUIRE(bind(fd, addr, len) == 0);
    if (type == SOCK_STREAM) REQUIRE(listen(fd, 4) == 0);
    return fd;
}

}   // namespace

TEST_CASE("notify: READY, STATUS, RELOADING, STOPPING reach NOTIFY_SOCKET in order") {
    NotifyListener sd;
    notify_ready("serving 2 exports\non 1 device");
    CHECK(sd.next() == "READY=1\nSTATUS=serving 2 exports on 1 device");
    notify_status("reading");
    CHECK(sd.next() == "STATUS=reading");
    notify_reloading();
    std::string reloading = sd.next();
    CHECK(reloading.rfind("RELOADING=1\n", 0) == 0);
    CHECK(reloading.find("\nMONOTONIC_USEC=") != std::string::npos);
    notify_ready("reloaded");
    CHECK(sd.next() == "READY=1\nSTATUS=reloaded");
    notify_stopping();
    CHECK(sd.next().rfind("STOPPING=1", 0) == 0);
}

TEST_CASE("notify: a start that waits extends the start timeout, in microseconds, and says why") {
    NotifyListener sd;
    notify_start_wait(std::chrono::seconds(60), "device vol1: waiting for its image's lock\nheld by client.4115");
    CHECK(sd.next() == "EXTEND_TIMEOUT_USEC=60000000\nSTATUS=device vol1: waiting for its image's lock held by "
                       "client.4115");
}

TEST_CASE("notify: without NOTIFY_SOCKET every call is a harmless no-op") {
    unsetenv("NOTIFY_SOCKET");
    notify_ready("x");
    notify_reloading();
    notify_start_wait(std::chrono::seconds(1), "x");
    notify_stopping();
    CHECK(true);
}

TEST_CASE("inherited_sockets: none without LISTEN_FDS") {
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    CHECK(inherited_sockets().empty());
}

TEST_CASE("inherited_sockets: unix, tcp and a non-stream socket from LISTEN_FDS") {
    const std::string path = temp_path("listen");
    unlink(path.c_str());
    auto ua = unix_addr(path);
    int u = listening(AF_UNIX, SOCK_STREAM, reinterpret_cast<sockaddr*>(&ua), sizeof ua);
    sockaddr_in ta{};
    ta.sin_family = AF_INET;
    ta.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int t = listening(AF_INET, SOCK_STREAM, reinterpret_cast<sockaddr*>(&ta), sizeof ta);
    socklen_t tlen = sizeof ta;
    REQUIRE(getsockname(t, reinterpret_cast<sockaddr*>(&ta), &tlen) == 0);
    sockaddr_in da = ta;
    da.sin_port = 0;
    int d = listening(AF_INET, SOCK_DGRAM, reinterpret_cast<sockaddr*>(&da), sizeof da);

    // Activated sockets start at fd 3: park whatever the test runner has
    // there, and put it back afterwards.
    std::vector<int> saved;
    for (int fd = 3; fd < 6; ++fd) saved.push_back(fcntl(fd, F_GETFD) >= 0 ? dup(fd) : -1);
    const int mine[] = {u, t, d};
    for (int i = 0; i < 3; ++i) REQUIRE(dup2(mine[i], 3 + i) == 3 + i);
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
    setenv("LISTEN_FDS", "3", 1);
    setenv("LISTEN_FDNAMES", "nbd-unix:nbd-tcp:junk", 1);

    auto got = inherited_sockets();

    for (int i = 0; i < 3; ++i) {
        close(3 + i);
        if (saved[i] >= 0) {
            dup2(saved[i], 3 + i);
            close(saved[i]);
        }
        close(mine[i]);
    }
    unlink(path.c_str());

    REQUIRE(got.size() == 3);
    CHECK(got[0].fd == 3);
    CHECK(got[0].kind == InheritedSocket::Kind::unix_socket);
    CHECK(got[0].family == AF_UNIX);
    CHECK(got[0].address == path);
    CHECK(got[0].name == "nbd-unix");
    CHECK(describe(got[0]) == "unix " + path);
    CHECK(got[1].fd == 4);
    CHECK(got[1].kind == InheritedSocket::Kind::tcp);
    CHECK(got[1].family == AF_INET);
    CHECK(got[1].address == "127.0.0.1:" + std::to_string(ntohs(ta.sin_port)));
    CHECK(got[1].name == "nbd-tcp");
    CHECK(got[2].kind == InheritedSocket::Kind::other);
    CHECK(got[2].name == "junk");
    // taken: a child process must not see them
    CHECK(std::getenv("LISTEN_FDS") == nullptr);
    CHECK(std::getenv("LISTEN_PID") == nullptr);
}
