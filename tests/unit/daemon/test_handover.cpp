// A planned restart's state and framing: the JSON a connection travels with
// (round trip, a mismatched version, bad descriptor indexes, malformed
// input) and the SCM_RIGHTS framing over a real socket pair (more
// descriptors than one message can carry, a peer that hangs up); the new
// process closes descriptors that came with a refusal or a malformed state;
// the hand-over socket is the owner's only, whatever the umask, and waits
// between accepts that fail for want of descriptors; the fd store's entries
// under a name nbdsched never gives, or two under one name, are closed, not
// used or leaked.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

#include "daemon/process/fdstore_handover.hpp"
#include "daemon/process/handover_server.hpp"
#include "daemon/process/handover_wire.hpp"
#include "daemon/process/takeover.hpp"
#include "daemon/session/connection.hpp"
#include "daemon/session/connection_state.hpp"
#include "kernel/connect.hpp"
#include "temp_dir.hpp"

using namespace nbdsched;
using daemon::ConnectionState;
using daemon::HandoverState;

namespace {

HandoverState sample() {
    HandoverState s;
    s.listeners.push_back({0, nbd::TlsMode::off});
    s.listeners.push_back({1, nbd::TlsMode::require});
    ConnectionState c;
    c.id = 42;
    c.peer = "unix pid 7 uid 1000";
    c.identity.is_unix = true;
    c.identity.pid = 7;
    c.identity.uid = 1000;
    c.identity.gid = 100;
    c.identity.groups = {100, 27};
    c.identity.cgroup = "/user.slice/a.scope";
    c.export_name = "disk0";
    c.export_size = 1ull << 40;
    c.transmission_flags = 0x1ed;
    c.structured = true;
    c.block_status = true;
    c.group = "gold";
    c.unread = {0x25, 0x60, 0x95, 0x13, 0x00, 0xff};
    c.fd = 2;
    s.connections.push_back(c);
    return s;
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
    auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
}

}   // namespace

TEST_CASE("hand-over state: what is serialised comes back") {
    std::string error;
    auto back = daemon::handover_from_json(daemon::to_json(sample()), 3, error);
    REQUIRE_MESSAGE(back, error);
    REQUIRE(back->listeners.size() == 2);
    CHECK(back->listeners[1].fd == 1);
    CHECK(back->listeners[1].tls_mode == nbd::TlsMode::require);
    REQUIRE(back->connections.size() == 1);
    const auto& c = back->connections[0];
    const auto sent = sample();
    const auto& want = sent.connections[0];
    CHECK(c.id == 42);
    CHECK(c.peer == want.peer);
    CHECK(c.identity.describe() == want.identity.describe());
    CHECK(c.identity.groups == want.identity.groups);
    CHECK_FALSE(c.identity.address.size());
    CHECK(c.export_name == "disk0");
    CHECK(c.export_size == 1ull << 40);
    CHECK(c.transmission_flags == 0x1ed);
    CHECK(c.structured);
    CHECK(c.block_status);
    CHECK(c.group == "gold");
    CHECK(c.unread == want.unread);
    CHECK(c.fd == 2);
}

TEST_CASE("hand-over state: a cgroup that is not UTF-8 comes back byte for byte") {
    // The new process classifies by it (rules:, allow:, weight: from-cgroup), so
    // it must not come back with U+FFFD, and serialising it must not throw.
    auto s = sample();
    s.connections[0].identity.cgroup = "/user.slice/t-\xff\xfe/\xc3\xa9";
    s.connections[0].peer = "unix pid 7 cgroup /user.slice/t-\xff";
    std::string text, error;
    REQUIRE_NOTHROW(text = daemon::to_json(s));
    CHECK(text.find("\"cgroup_hex\"") != std::string::npos);
    auto back = daemon::handover_from_json(text, 3, error);
    REQUIRE_MESSAGE(back, error);
    CHECK(back->connections[0].identity.cgroup == s.connections[0].identity.cgroup);
    // A reader that knows only "cgroup" (the same version, before cgroup_hex) gets a readable form.
    auto plain = nlohmann::json::parse(text)["connections"][0]["identity"]["cgroup"].get<std::string>();
    CHECK(plain == "/user.slice/t-\xef\xbf\xbd\xef\xbf\xbd/\xc3\xa9");
    // A UTF-8 cgroup travels as before, without the hex field.
    CHECK(daemon::to_json(sample()).find("cgroup_hex") == std::string::npos);
    CHECK_FALSE(daemon::handover_from_json(replaced(text, "\"cgroup_hex\":\"", "\"cgroup_hex\":\"x"), 3, error));
}

TEST_CASE("hand-over state: refused rather than guessed") {
    const std::string good = daemon::to_json(sample());
    std::string error;
    CHECK_FALSE(daemon::handover_from_json(replaced(good, "\"version\":1", "\"version\":2"), 3, error));
    CHECK(error == "hand-over state version 2, this nbdsched reads version 1");
    CHECK_FALSE(daemon::handover_from_json(good, 2, error));   // connection's descriptor 2 was not passed
    CHECK(error.find("descriptor index 2 outside the 2 passed") != std::string::npos);
    CHECK_FALSE(daemon::handover_from_json(replaced(good, "\"export\":\"disk0\",", ""), 3, error));
    CHECK(error.find("malformed hand-over state") == 0);
    CHECK_FALSE(daemon::handover_from_json(replaced(good, "2560", "2x60"), 3, error));
    CHECK(error.find("hex") != std::string::npos);
    CHECK_FALSE(daemon::handover_from_json("{\"version\":1,", 3, error));
    CHECK_FALSE(daemon::handover_from_json(replaced(good, "\"tls\":2", "\"tls\":9"), 3, error));
}

TEST_CASE("hand-over framing: text and descriptors over a socket pair") {
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    kernel::set_io_timeouts(sv[1], std::chrono::milliseconds(2000));
    // 300 descriptors: more than one SCM_RIGHTS message carries.
    std::vector<int> fds(300, sv[0]);
    fds[299] = STDERR_FILENO;
    std::string error;
    // The receiver reads on the same thread: the socket buffer holds it all.
    REQUIRE_MESSAGE(daemon::send_handover(sv[0], "state {}", fds, error), error);
    auto m = daemon::recv_handover(sv[1], error);
    REQUIRE_MESSAGE(m, error);
    CHECK(m->text == "state {}");
    REQUIRE(m->fds.size() == 300);
    struct stat a = {};
    struct stat b = {};
    ::fstat(sv[0], &a);
    ::fstat(m->fds[0], &b);
    CHECK(a.st_ino == b.st_ino);   // the same socket, another descriptor
    ::fstat(STDERR_FILENO, &a);
    ::fstat(m->fds[299], &b);
    CHECK(a.st_ino == b.st_ino);
    for (int fd : m->fds) ::close(fd);

    REQUIRE(daemon::send_handover(sv[0], "bye", {}, error));
    m = daemon::recv_handover(sv[1], error);
    REQUIRE(m);
    CHECK(m->text == "bye");
    CHECK(m->fds.empty());

    ::close(sv[0]);
    CHECK_FALSE(daemon::recv_handover(sv[1], error));
    CHECK(error == "hand-over: the other process closed the connection");
    ::close(sv[1]);
}

TEST_CASE("hand-over framing: the text limit follows the descriptors") {
    // Each descriptor may be a connection with a full read buffer, as hex.
    CHECK(daemon::max_handover_text(200) > 200 * 2 * daemon::Connection::read_buffer_size);
    CHECK(daemon::max_handover_text(1024) > daemon::max_handover_text(200));
    int sv[2];
    REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    kernel::set_io_timeouts(sv[1], std::chrono::milliseconds(2000));
    std::string error;
    // The sender refuses, saying why, and sends nothing.
    CHECK_FALSE(daemon::send_handover(sv[0], std::string(daemon::max_handover_text(0) + 1, 'x'), {}, error));
    CHECK(error.find("over the limit") != std::string::npos);
    // A header over it is refused by the receiver the same way.
    const std::uint32_t header[2] = {static_cast<std::uint32_t>(daemon::max_handover_text(1) + 1), 1};
    REQUIRE(::send(sv[0], header, sizeof header, 0) == sizeof header);
    CHECK_FALSE(daemon::recv_handover(sv[1], error));
    CHECK(error.find("over the limit") != std::string::npos);
    ::close(sv[0]);
    ::close(sv[1]);
}

namespace {

// Plays the old daemon for one request: answers `reply` with the write end
// of a pipe, closes its own copy, and returns the read end. Once every copy
// of the write end is closed, the read end reports POLLHUP.
int fake_old_daemon(const std::string& path, const std::string& reply, std::thread& thread) {
    int listener = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    ::unlink(path.c_str());
    REQUIRE(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::listen(listener, 1) == 0);
    int pipe_fds[2];
    REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
    thread = std::thread([listener, reply, write_end = pipe_fds[1]] {
        int peer = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
        std::string error;
        kernel::set_io_timeouts(peer, std::chrono::milliseconds(2000));
        auto request = daemon::recv_handover(peer, error);
        if (request) daemon::send_handover(peer, reply, {write_end}, error);
        ::close(write_end);
        daemon::recv_handover(peer, error);   // the verdict, if any
        ::close(peer);
        ::close(listener);
    });
    return pipe_fds[0];
}

bool all_writers_closed(int read_end) {
    pollfd p{read_end, POLLIN, 0};
    return ::poll(&p, 1, 2000) == 1 && (p.revents & POLLHUP) != 0;
}

}   // namespace

TEST_CASE("takeover: descriptors that came with a refusal or a malformed state are closed") {
    testlib::TempDir dir;
    const auto path = dir.file("handover.sock");
    for (const std::string reply : {"state {\"version\": ", "refused not now"}) {
        CAPTURE(reply);
        std::thread old;
        int read_end = fake_old_daemon(path, reply, old);
        std::string error;
        auto t = daemon::Takeover::request(path, false, std::chrono::milliseconds(2000), error);
        old.join();
        CHECK_FALSE(t);
        CHECK_FALSE(error.empty());
        CHECK(all_writers_closed(read_end));
        ::close(read_end);
    }
}

TEST_CASE("hand-over socket: the owner's only, whatever the umask") {
    testlib::TempDir dir;
    boost::asio::io_context io;
    std::string error;
    mode_t old = ::umask(0);
    auto server = daemon::HandoverServer::open(io, dir.file("h.sock"), false, {}, error);
    ::umask(old);
    REQUIRE_MESSAGE(server, error);
    struct stat st = {};
    REQUIRE(::stat(dir.file("h.sock").c_str(), &st) == 0);
    CHECK(S_ISSOCK(st.st_mode));
    CHECK((st.st_mode & 0777) == 0600);
}

namespace {

// Every descriptor number below the soft limit in use, the limit restored
// and the fillers closed when it goes out of scope.
class OutOfDescriptors {
public:
    OutOfDescriptors() {
        ::getrlimit(RLIMIT_NOFILE, &saved_);
        int highest = 0;
        DIR* d = ::opendir("/proc/self/fd");
        while (dirent* e = d ? ::readdir(d) : nullptr) highest = std::max(highest, std::atoi(e->d_name));
        if (d) ::closedir(d);
        rlimit low = saved_;
        low.rlim_cur = static_cast<rlim_t>(highest + 1);
        ::setrlimit(RLIMIT_NOFILE, &low);
        for (int fd; (fd = ::dup(STDERR_FILENO)) >= 0;) fillers_.push_back(fd);
    }
    ~OutOfDescriptors() {
        for (int fd : fillers_) ::close(fd);
        ::setrlimit(RLIMIT_NOFILE, &saved_);
    }

private:
    rlimit saved_{};
    std::vector<int> fillers_;
};

}   // namespace

TEST_CASE("hand-over socket: out of descriptors, accept waits between tries instead of spinning") {
    testlib::TempDir dir;
    boost::asio::io_context io;
    std::string error;
    const auto path = dir.file("h.sock");
    auto server = daemon::HandoverServer::open(io, path, false, {}, error);
    REQUIRE_MESSAGE(server, error);
    server->start();
    int client = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);   // waits in the backlog
    {
        // UBSan checks an object's type the first time it sees it, with a
        // pipe to probe memory: without a free descriptor it took the logger
        // for a bad object. So nothing is logged while descriptors run out,
        // and the one logger call left (which finds logging off) is checked
        // beforehand.
        const auto level = spdlog::get_level();
        spdlog::set_level(spdlog::level::off);
        spdlog::warn("");
        {
            OutOfDescriptors full;
            io.run_for(std::chrono::milliseconds(500));
        }
        spdlog::set_level(level);
    }
    // 10 ms doubling: 6 tries in 500 ms (a loop retrying at once makes thousands).
    CHECK(server->failed_accepts() >= 2);
    CHECK(server->failed_accepts() <= 10);
    ::close(client);
}

TEST_CASE("fd store: a descriptor name with an index nbdsched never gives is an error, not a write out of bounds") {
    for (const char* name :
         {"nbdsched-fd18446744073709551615", "nbdsched-fd99999999999", "nbdsched-fd", "nbdsched-fd1x", "nbdsched-fd01"}) {
        CAPTURE(name);
        const std::string state = R"({"version":1,"listeners":[],"connections":[]})";
        int memfd = ::memfd_create("state", MFD_CLOEXEC);
        REQUIRE(memfd >= 0);
        REQUIRE(::write(memfd, state.data(), state.size()) == static_cast<ssize_t>(state.size()));
        int pipe_fds[2];
        REQUIRE(::pipe(pipe_fds) == 0);
        ::close(pipe_fds[1]);
        std::vector<daemon::InheritedSocket> inherited(2);
        inherited[0].fd = memfd;
        inherited[0].name = "nbdsched-state";
        inherited[1].fd = pipe_fds[0];
        inherited[1].name = name;
        std::string error;
        auto handed = daemon::take_from_fd_store(inherited, error);
        CHECK_FALSE(handed.has_value());
        CHECK(error.find("not one nbdsched stores") != std::string::npos);
        CHECK(inherited.empty());
        CHECK(::fcntl(pipe_fds[0], F_GETFD) == -1);   // closed
    }
}

namespace {

// A memfd holding `text`, as push_to_fd_store stores the state.
int stored_state(const std::string& text) {
    int fd = ::memfd_create("state", MFD_CLOEXEC);
    REQUIRE(fd >= 0);
    REQUIRE(::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()));
    return fd;
}

// A pipe's read end standing in for a stored socket (its write end closed).
int stored_socket() {
    int p[2];
    REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
    ::close(p[1]);
    return p[0];
}

daemon::InheritedSocket named(int fd, const std::string& name) {
    daemon::InheritedSocket s;
    s.fd = fd;
    s.name = name;
    return s;
}

bool is_open(int fd) {
    return ::fcntl(fd, F_GETFD) != -1;
}

}   // namespace

TEST_CASE("fd store: two descriptors under a connection's index are both closed and that connection is dropped") {
    const int state = stored_state(daemon::to_json(sample()));   // listeners on 0 and 1, a connection on 2
    const int l0 = stored_socket(), l1 = stored_socket(), c2 = stored_socket(), other2 = stored_socket();
    std::vector<daemon::InheritedSocket> inherited = {named(state, "nbdsched-state"), named(l0, "nbdsched-fd0"),
                                                      named(c2, "nbdsched-fd2"), named(l1, "nbdsched-fd1"),
                                                      named(other2, "nbdsched-fd2")};
    std::string error;
    auto handed = daemon::take_from_fd_store(inherited, error);
    REQUIRE_MESSAGE(handed, error);
    CHECK(inherited.empty());
    CHECK(handed->fds == std::vector<int>{l0, l1, -1});
    CHECK(handed->state.listeners.size() == 2);
    CHECK(handed->state.connections.empty());
    CHECK_FALSE(is_open(c2));
    CHECK_FALSE(is_open(other2));
    CHECK_FALSE(is_open(state));
    ::close(l0);
    ::close(l1);
}

TEST_CASE("fd store: a listener's index given twice, or two states, refuse the hand-over and close every descriptor") {
    SUBCASE("a listener's index twice") {
        const int state = stored_state(daemon::to_json(sample()));
        const std::vector<int> fds = {stored_socket(), stored_socket(), stored_socket(), stored_socket()};
        std::vector<daemon::InheritedSocket> inherited = {named(state, "nbdsched-state"), named(fds[0], "nbdsched-fd0"),
                                                          named(fds[1], "nbdsched-fd0"), named(fds[2], "nbdsched-fd1"),
                                                          named(fds[3], "nbdsched-fd2")};
        std::string error;
        CHECK_FALSE(daemon::take_from_fd_store(inherited, error));
        CHECK(error.find("a listener's descriptor is missing") != std::string::npos);
        CHECK_FALSE(is_open(state));
        for (int fd : fds) CHECK_FALSE(is_open(fd));
    }
    SUBCASE("two states") {
        const int first = stored_state(daemon::to_json(sample()));
        const int second = stored_state(daemon::to_json(sample()));
        const std::vector<int> fds = {stored_socket(), stored_socket(), stored_socket()};
        std::vector<daemon::InheritedSocket> inherited = {named(first, "nbdsched-state"), named(fds[0], "nbdsched-fd0"),
                                                          named(fds[1], "nbdsched-fd1"), named(fds[2], "nbdsched-fd2"),
                                                          named(second, "nbdsched-state")};
        std::string error;
        CHECK_FALSE(daemon::take_from_fd_store(inherited, error));
        CHECK(error.find("2 descriptors named nbdsched-state") != std::string::npos);
        CHECK_FALSE(is_open(first));
        CHECK_FALSE(is_open(second));
        for (int fd : fds) CHECK_FALSE(is_open(fd));
    }
}

TEST_CASE("hand-over state: a number out of its field's range or with a fraction is malformed, not wrapped") {
    const std::string conn = R"({"id":1,"peer":"p","identity":{"unix":true,"groups":[GROUPS],"cgroup":"/","address":""},)"
                             R"("export":"e","size":1,"flags":FLAGS,"structured":false,"block_status":false,"group":"",)"
                             R"("unread":"","fd":FD})";
    auto state = [&](const std::string& fd, const std::string& flags, const std::string& groups,
                     const std::string& version) {
        std::string c = conn;
        c.replace(c.find("GROUPS"), 6, groups);
        c.replace(c.find("FLAGS"), 5, flags);
        c.replace(c.find("FD"), 2, fd);
        return R"({"version":)" + version + R"(,"listeners":[],"connections":[)" + c + "]}";
    };
    std::string error;
    REQUIRE(daemon::handover_from_json(state("0", "1", "0", "1"), 1, error));
    // 2^32 wrapped to descriptor 0, 2^16 + 1 to flags 1, 2^32 + 1 to version 1;
    // 1e300 into an int was undefined.
    for (const auto& bad : {state("4294967296", "1", "0", "1"), state("0", "65537", "0", "1"),
                            state("0", "1", "4294967296", "1"), state("0", "1", "0", "4294967297"),
                            state("1e300", "1", "0", "1"), state("0.5", "1", "0", "1"), state("-1", "1", "-1", "1")}) {
        CAPTURE(bad);
        error.clear();
        CHECK_FALSE(daemon::handover_from_json(bad, 1, error));
        CHECK(error.find("malformed hand-over state") != std::string::npos);
    }
}

TEST_CASE("hand-over state: a ctl weight outside 1..1000 is malformed") {
    auto state = [](const std::string& weight) {
        return R"({"version":1,"listeners":[],"connections":[],"ctl_changes":{"weights":[{"group":"g","weight":)" +
               weight + R"(,"file_weight":100}],"tunables":[],"faults":[]}})";
    };
    std::string error;
    REQUIRE(daemon::handover_from_json(state("1000"), 0, error));
    for (const char* bad : {"0", "1001", "70000"}) {
        CAPTURE(bad);
        error.clear();
        CHECK_FALSE(daemon::handover_from_json(state(bad), 0, error));
        CHECK(error.find("out of range") != std::string::npos);
    }
}
