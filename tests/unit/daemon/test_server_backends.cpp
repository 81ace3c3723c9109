// The server with a blocking backend (file, on the thread pool) and with an
// emulated device (timing model: replies released by a timer).
#include <doctest/doctest.h>

#include <chrono>
#include <filesystem>

#include "pattern.hpp"
#include "raw_client.hpp"
#include "server_fixture.hpp"

using namespace nbdsched;
using namespace nbdsched::testing;
using namespace nbdsched::testlib;
using namespace nbdsched::nbd;
using namespace std::chrono_literals;

namespace {

struct TempFile {
    std::string path;
    TempFile() {
        char tmpl[] = "/tmp/nbdsched-unit-file-XXXXXX";
        int fd = ::mkstemp(tmpl);
        REQUIRE(fd >= 0);
        ::close(fd);
        path = tmpl;
        std::filesystem::remove(path);   // the backend creates it with the configured size
    }
    ~TempFile() { std::filesystem::remove(path); }
};

}   // namespace

TEST_CASE("file backend: pipelined writes and reads through the thread pool, flush, persistence") {
    TempFile file;
    auto config = standard_config();
    config.devices[0].backend = config::BackendKind::file;
    config.devices[0].path = file.path;
    config.devices[0].size = 8u << 20;
    {
        TestServer server(config);
        RawClient c(server.socket());
        REQUIRE(c.handshake("default", true));
        CHECK(c.size() == (8u << 20));
        constexpr int n = 64;
        for (int i = 0; i < n; ++i)
            c.send(WRITE, static_cast<std::uint64_t>(i), static_cast<std::uint64_t>(i) * 65536, 65536,
                   i % 3 == 0 ? cmd_flag_fua : 0, pattern(0, 65536, static_cast<std::uint8_t>(i)));
        for (int i = 0; i < n; ++i) {
            auto r = c.receive(0);
            REQUIRE(r);
            CHECK(r->error == 0);
        }
        c.send(FLUSH, 500, 0, 0);
        auto f = c.receive(0);
        REQUIRE(f);
        CHECK(f->error == 0);
        for (int i = 0; i < n; ++i) c.send(READ, 1000u + i, static_cast<std::uint64_t>(i) * 65536, 65536);
        for (int i = 0; i < n; ++i) {
            auto r = c.receive(65536);
            REQUIRE(r);
            CHECK(r->data == pattern(0, 65536, static_cast<std::uint8_t>(r->cookie - 1000)));
        }
        c.send(ZEROES, 2000, 0, 65536, cmd_flag_no_hole);
        REQUIRE(c.receive(0));
        CHECK(server.stop() == 0);
    }
    // The data is in the file after a clean stop.
    FILE* f = std::fopen(file.path.c_str(), "rb");
    REQUIRE(f);
    std::vector<std::uint8_t> block(65536);
    std::fseek(f, 65536, SEEK_SET);
    REQUIRE(std::fread(block.data(), 1, block.size(), f) == block.size());
    std::fclose(f);
    CHECK(block == pattern(0, 65536, 1));
}

TEST_CASE("timing model: replies wait for the emulated device without blocking other devices") {
    auto config = standard_config();
    auto slow = ram_device("slow", 16u << 20);
    slow.profile = "ssd";
    slow.profile_params = {{"read_latency", "200ms"}, {"write_latency", "200ms"}};
    config.devices.push_back(slow);
    config.exports.push_back(make_export("slow", "slow"));
    TestServer server(config);

    RawClient s(server.socket());
    REQUIRE(s.handshake("slow", false));
    RawClient fast(server.socket());
    REQUIRE(fast.handshake("default", false));

    auto t0 = std::chrono::steady_clock::now();
    s.send(READ, 1, 0, 4096);
    // While the emulated read is outstanding, the other device answers at once.
    fast.send(READ, 2, 0, 4096);
    REQUIRE(fast.receive(4096));
    auto fast_done = std::chrono::steady_clock::now() - t0;
    auto r = s.receive(4096);
    REQUIRE(r);
    CHECK(r->error == 0);
    auto slow_done = std::chrono::steady_clock::now() - t0;
    CHECK(slow_done >= 195ms);
    CHECK(fast_done < slow_done);
    CHECK(fast_done < 150ms);
}

namespace {
std::size_t thread_count() {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator("/proc/self/task")) ++n;
    return n;
}

// Threads a server with `io_threads` adds to this process while it runs.
std::size_t threads_added(unsigned io_threads) {
    TempFile file;
    auto config = standard_config();
    config.devices[0].backend = config::BackendKind::file;
    config.devices[0].path = file.path;
    config.devices[0].size = 1u << 20;
    config.limits.io_threads = io_threads;
    // Two event loops, whose second thread must be running once the server
    // reports ready (Server::run starts every loop first).
    config.limits.threads = 2;
    const std::size_t before = thread_count();
    TestServer server(config);
    const std::size_t during = thread_count();
    CHECK(server.stop() == 0);
    return during - before;
}
}   // namespace

TEST_CASE("limits.io_threads sizes the pool that runs blocking backends") {
    // The difference cancels the server's event-loop threads.
    CHECK(threads_added(7) - threads_added(2) == 5);
}
