// Misbehaving clients: each one closes only its own
// connection, while a well-behaved libnbd client on another connection keeps
// writing and reading verified data throughout, and the daemon keeps running.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"
#include "nbd_client.hpp"
#include "raw_client.hpp"

using namespace nbdsched::itest;

namespace {

// A libnbd client looping verified writes and reads on its own region.
class Witness {
public:
    explicit Witness(const std::string& uri) : thread_([this, uri] { run(uri); }) {}
    ~Witness() { finish(); }
    void finish() {
        stop_ = true;
        if (thread_.joinable()) thread_.join();
    }
    long rounds() const { return rounds_; }
    // Waits until the witness completes two more rounds (so at least one
    // started after now); false on error or after a generous timeout.
    bool advances() {
        const long target = rounds_ + 2;
        for (int i = 0; i < 30000 && error_ready_ == false; ++i) {
            if (rounds_ >= target) return true;
            std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        return false;
    }
    const std::string& error() const { return error_; }
private:
    void run(const std::string& uri) {
        try {
            Nbd h = connect(uri);
            for (std::uint32_t i = 0; !stop_; ++i) {
                std::uint64_t off = 48ull * 1024 * 1024 + (i % 64) * 65536 + i % 7;
                if (write_pattern(h, 65536, off, i) != 0)
                    throw std::runtime_error("pwrite: " + nbd_error());
                if (auto e = verify_pattern(h, 65536, off, i); !e.empty())
                    throw std::runtime_error(e);
                ++rounds_;
            }
        } catch (const std::exception& e) {
            error_ = e.what();
            error_ready_ = true;
        }
    }
    std::atomic<bool> stop_{false};
    std::atomic<bool> error_ready_{false};
    std::atomic<long> rounds_{0};
    std::string error_;
    std::thread thread_;
};

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
         RawConn c(d.socket_path());
         c.recv(18);
         c.send(garbage(256));
         CHECK_MESSAGE(c.wait_closed(), "the daemon kept a connection that sent garbage");
     }, "closing: client sent unknown client flags"},
    {"garbage right after connecting, without reading", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.send(garbage(4096));
         CHECK(c.wait_closed());
     }},
    {"an option with a huge length", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.greet();
         std::vector<std::uint8_t> opt;
         put_be(opt, nbd::k_opt_magic, 8);
         put_be(opt, nbd::k_opt_go, 4);
         put_be(opt, 0xFFFFFFF0u, 4);
         opt.resize(opt.size() + 64, 0);
         c.send(opt);
         // It may answer with an error first, but must not wait for 4 GiB.
         CHECK_MESSAGE(c.wait_closed(), "the daemon waits for a 4 GiB option");
     }, "closing: option NBD_OPT_GO length 4294967280 is too large"},
    {"disconnect in the middle of the handshake", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.greet();
         std::vector<std::uint8_t> opt;
         put_be(opt, nbd::k_opt_magic, 8);
         put_be(opt, nbd::k_opt_export_name, 4);
         c.send(opt);
     }},
    {"a request header cut in half", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.open_export("default");
         auto r = RawConn::request(nbd::k_cmd_read, 1, 0, 4096);
         r.resize(14);
         c.send(r);
     }},
    {"a write whose payload never arrives", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.open_export("default");
         auto r = RawConn::request(nbd::k_cmd_write, 2, 0, 65536);
         auto part = garbage(1000);
         r.insert(r.end(), part.begin(), part.end());
         c.send(r);
     }},
    {"bad magic in a transmission request", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.open_export("default");
         c.send(RawConn::request(nbd::k_cmd_read, 3, 0, 4096, 0, 0xDEADBEEF));
         CHECK_MESSAGE(c.wait_closed(), "the daemon kept a connection with bad magic");
     }, "closing: malformed request (bad magic)"},
    {"a write header announcing 1 GiB, then close", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.open_export("default");
         c.send(RawConn::request(nbd::k_cmd_write, 4, 0, 1u << 30));
     }},
    {"requests in flight, then close without reading the replies", [](Daemon& d) {
         RawConn c(d.socket_path());
         c.open_export("default");
         for (std::uint64_t i = 0; i < 32; ++i)
             c.send(RawConn::request(nbd::k_cmd_read, 10 + i, i * 65536, 65536));
     }},
};

} // namespace

TEST_CASE("misbehaving clients close only their own connection") {
    Daemon d(standard_spec());
    Witness witness(d.uri());
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
        RawConn c(d.socket_path());
        CHECK(c.open_export("default") == (64ull << 20));
        c.send(RawConn::request(0x55, 7, 0, 0));
        CHECK(c.recv_simple_reply(7) == 22);   // NBD_EINVAL
        c.send(RawConn::request(nbd::k_cmd_read, 8, 0, 512));
        CHECK(c.recv_simple_reply(8) == 0);
        CHECK(c.recv(512) == std::vector<std::uint8_t>(512, 0));
        c.send(RawConn::request(nbd::k_cmd_disc, 9, 0, 0));
        CHECK(c.wait_closed());
    }
    check_daemon_serves(d, 1);
    CHECK(d.stop() == 0);
}

TEST_CASE("hundreds of connections opened and dropped") {
    Daemon d(standard_spec());
    for (int i = 0; i < 300; ++i) {
        RawConn c(d.socket_path());
        if (i % 3 == 1) c.greet();
        if (i % 3 == 2) c.open_export("default");
    }
    check_daemon_serves(d, 2);
    CHECK(d.stop() == 0);
}
