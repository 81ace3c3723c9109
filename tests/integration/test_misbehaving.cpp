// Misbehaving clients: each one closes only its own
// connection, while a well-behaved libnbd client on another connection keeps
// writing and reading verified data throughout, and the daemon keeps running.
#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "nbd/wire.hpp"
#include "raw_client.hpp"
#include "witness.hpp"

using namespace nbdsched;
using namespace nbdsched::testlib;

namespace {

std::vector<std::uint8_t> garbage(std::size_t n) {
    std::vector<std::uint8_t> g(n);
    for (std::size_t i = 0; i < n; ++i) g[i] = static_cast<std::uint8_t>(i * 131 + 7);
    return g;
}

// A fresh well-behaved connection works and the daemon is alive.
void check_daemon_serves(Daemon& d, std::uint32_t seed) {
    CHECK(d.running());
    Nbd h = connect(d.uri());
    CHECK(write_pattern(h, 4096, 4096 * seed, seed) == 0);
    CHECK(verify_pattern(h, 4096, 4096 * seed, seed) == "");
}

struct Misbehaviour {
    const char* name;
    std::function<void(Daemon&)> act;
    // A malformed packet must leave a log line naming the problem; nullptr
    // where the daemon has nothing it must say (a client that just hangs up).
    const char* logged = nullptr;
};

std::size_t count_of(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
    return n;
}

// Waits (generously: the line is written as the daemon closes) until the
// daemon's log holds more than `before` lines with `what`.
bool logged_again(const Daemon& d, const std::string& what, std::size_t before) {
    for (int i = 0; i < 1000; ++i) {
        if (count_of(d.log(), what) > before) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

const std::vector<Misbehaviour> k_cases = {
    {"garbage instead of client flags and options", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.recv(18);
         c.send(garbage(256));
         CHECK_MESSAGE(c.wait_closed(), "the daemon kept a connection that sent garbage");
     },
     "closing: client sent unknown client flags"},
    {"garbage right after connecting, without reading", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.send(garbage(4096));
         CHECK(c.wait_closed());
     }},
    {"an option with a huge length", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.greet();
         std::vector<std::uint8_t> opt;
         nbd::Writer w(opt);
         w.u64(nbd::ihaveopt);
         w.u32(static_cast<std::uint32_t>(nbd::Option::go));
         w.u32(0xFFFFFFF0u);
         w.zeroes(64);
         c.send(opt);
         // It may answer with an error first, but must not wait for 4 GiB.
         CHECK_MESSAGE(c.wait_closed(), "the daemon waits for a 4 GiB option");
     },
     "closing: option NBD_OPT_GO length 4294967280 is too large"},
    {"disconnect in the middle of the handshake", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.greet();
         std::vector<std::uint8_t> opt;
         nbd::Writer w(opt);
         w.u64(nbd::ihaveopt);
         w.u32(static_cast<std::uint32_t>(nbd::Option::export_name));
         c.send(opt);
     }},
    {"a request header cut in half", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.open_export("default");
         auto r = RawClient::request(READ, 1, 0, 4096);
         r.resize(14);
         c.send(r);
     }},
    {"a write whose payload never arrives", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.open_export("default");
         auto r = RawClient::request(WRITE, 2, 0, 65536);
         auto part = garbage(1000);
         r.insert(r.end(), part.begin(), part.end());
         c.send(r);
     }},
    {"bad magic in a transmission request", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.open_export("default");
         c.send(RawClient::request(READ, 3, 0, 4096, 0, 0xDEADBEEF));
         CHECK_MESSAGE(c.wait_closed(), "the daemon kept a connection with bad magic");
     },
     "closing: malformed request (bad magic)"},
    {"a write header announcing 1 GiB, then close", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.open_export("default");
         c.send(RawClient::request(WRITE, 4, 0, 1u << 30));
     }},
    {"requests in flight, then close without reading the replies", [](Daemon& d) {
         RawClient c(d.socket_path());
         c.open_export("default");
         for (std::uint64_t i = 0; i < 32; ++i)
             c.send(RawClient::request(READ, 10 + i, i * 65536, 65536));
     }},
};

}   // namespace

TEST_CASE("misbehaving clients close only their own connection") {
    Daemon d(standard_spec());
    Witness witness(d.uri(), 48ull << 20);   // its own region, far from the misbehaving
    std::uint32_t seed = 1;
    for (const auto& m : k_cases) {
        const std::string name = m.name;
        CAPTURE(name);
        const std::size_t logged_before = m.logged ? count_of(d.log(), m.logged) : 0;
        try {
            m.act(d);
        } catch (const std::exception& e) {
            FAIL_CHECK(m.name << ": " << e.what());
        }
        if (m.logged && !nbdkit_mode())
            CHECK_MESSAGE(logged_again(d, m.logged, logged_before),
                          "no log line '" << std::string(m.logged) << "'");
        check_daemon_serves(d, seed++);
        CHECK_MESSAGE(witness.advances(), "the concurrent client stalled or failed");
    }
    witness.finish();
    CHECK(witness.error() == "");
    CHECK(witness.rounds() > 0);
    CHECK(d.stop() == 0);
}

TEST_CASE("an unknown command gets EINVAL and keeps the connection") {
    Daemon d(standard_spec());
    {
        RawClient c(d.socket_path());
        CHECK(c.open_export("default") == (64ull << 20));
        c.send(RawClient::request(0x55, 7, 0, 0));
        CHECK(c.recv_simple_reply(7) == 22);   // NBD_EINVAL
        c.send(RawClient::request(READ, 8, 0, 512));
        CHECK(c.recv_simple_reply(8) == 0);
        CHECK(c.recv(512) == std::vector<std::uint8_t>(512, 0));
        c.send(RawClient::request(DISC, 9, 0, 0));
        CHECK(c.wait_closed());
    }
    check_daemon_serves(d, 1);
    CHECK(d.stop() == 0);
}

TEST_CASE("hundreds of connections opened and dropped") {
    Daemon d(standard_spec());
    for (int i = 0; i < 300; ++i) {
        RawClient c(d.socket_path());
        if (i % 3 == 1) c.greet();
        if (i % 3 == 2) c.open_export("default");
    }
    check_daemon_serves(d, 2);
    CHECK(d.stop() == 0);
}
