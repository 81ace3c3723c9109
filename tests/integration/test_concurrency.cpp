// The server under concurrency: several connections to one export seeing each
// other's data (multi-conn), 64 requests in flight on one connection (replies
// may come out of order), and threads hammering their own connections.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_mib = 1ull << 20;

// Polls until nothing is in flight; false on error.
bool drain(nbd_handle* h) {
    while (nbd_aio_in_flight(h) > 0)
        if (nbd_poll(h, -1) == -1) return false;
    return true;
}

}   // namespace

TEST_CASE("several connections to one export read each other's writes") {
    Daemon d(standard_spec());
    {
        std::vector<std::unique_ptr<Nbd>> conns;
        for (int i = 0; i < 4; ++i) conns.push_back(std::make_unique<Nbd>(connect(d.uri())));
        for (auto& c : conns) REQUIRE(nbd_can_multi_conn(*c) == 1);
        for (std::uint32_t i = 0; i < conns.size(); ++i) {
            REQUIRE_MESSAGE(write_pattern(*conns[i], k_mib + 1, i * 4 * k_mib + 3, i) == 0,
                            nbd_error());
            // With multi-conn, a flush on one connection makes the writes
            // completed on it visible to every connection.
            REQUIRE(nbd_flush(*conns[i], 0) == 0);
        }
        for (std::uint32_t reader = 0; reader < conns.size(); ++reader)
            for (std::uint32_t i = 0; i < conns.size(); ++i) {
                CAPTURE(reader);
                CAPTURE(i);
                CHECK(verify_pattern(*conns[reader], k_mib + 1, i * 4 * k_mib + 3, i) == "");
            }
        // Ping-pong: each connection overwrites its neighbour's stripe.
        for (std::uint32_t i = 0; i < conns.size(); ++i) {
            std::uint32_t next = (i + 1) % conns.size();
            REQUIRE(write_pattern(*conns[i], 4096, next * 4 * k_mib + 3, 50 + i,
                                  LIBNBD_CMD_FLAG_FUA) == 0);
            CHECK(verify_pattern(*conns[next], 4096, next * 4 * k_mib + 3, 50 + i) == "");
        }
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("64 requests in flight on one connection") {
    Daemon d(standard_spec());
    for (bool structured : {true, false}) {
        CAPTURE(structured);
        Nbd h = connect(d.uri(), structured);
        constexpr int n = 64;
        constexpr std::size_t len = 65536 + 17;
        const std::uint32_t seed = structured ? 1000 : 2000;
        auto offset = [](int i) { return std::uint64_t(i) * 128 * 1024 + 7 * i; };

        std::vector<std::vector<std::uint8_t>> out;
        std::vector<std::int64_t> cookies;
        for (int i = 0; i < n; ++i) {
            out.push_back(pattern(offset(i), len, seed + i));
            std::uint32_t flags = (i % 4 == 0) ? LIBNBD_CMD_FLAG_FUA : 0;
            auto c = nbd_aio_pwrite(h, out.back().data(), len, offset(i),
                                    NBD_NULL_COMPLETION, flags);
            REQUIRE_MESSAGE(c > 0, nbd_error());
            cookies.push_back(c);
        }
        REQUIRE_MESSAGE(drain(h), nbd_error());
        for (auto c : cookies) CHECK_MESSAGE(nbd_aio_command_completed(h, c) == 1, nbd_error());

        // Reads of everything plus, at the same time, writes to a fresh area.
        std::vector<std::vector<std::uint8_t>> in(n, std::vector<std::uint8_t>(len));
        std::vector<std::vector<std::uint8_t>> more;
        cookies.clear();
        for (int i = 0; i < n; ++i) {
            auto c = nbd_aio_pread(h, in[i].data(), len, offset(i), NBD_NULL_COMPLETION, 0);
            REQUIRE_MESSAGE(c > 0, nbd_error());
            cookies.push_back(c);
            more.push_back(pattern(32 * k_mib + i * 4096, 4096, seed + n + i));
            c = nbd_aio_pwrite(h, more.back().data(), 4096, 32 * k_mib + i * 4096,
                               NBD_NULL_COMPLETION, 0);
            REQUIRE_MESSAGE(c > 0, nbd_error());
            cookies.push_back(c);
        }
        REQUIRE_MESSAGE(drain(h), nbd_error());
        for (auto c : cookies) CHECK_MESSAGE(nbd_aio_command_completed(h, c) == 1, nbd_error());
        for (int i = 0; i < n; ++i) {
            CAPTURE(i);
            CHECK((in[i] == out[i]));
            CHECK(verify_pattern(h, 4096, 32 * k_mib + i * 4096, seed + n + i) == "");
        }
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("threads with their own connections keep their data apart") {
    Daemon d(standard_spec());
    constexpr int threads = 4;
    constexpr std::uint64_t stripe = 8 * k_mib;
    std::atomic<int> failures{0};
    std::vector<std::string> errors(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
            try {
                Nbd h = connect(d.uri());
                std::mt19937_64 rng(t);
                // Shadow copy of what this thread's stripe must contain.
                std::vector<std::uint8_t> shadow(stripe, 0);
                const std::uint64_t base = t * stripe;
                for (int i = 0; i < 150; ++i) {
                    std::size_t len = 1 + rng() % (128 * 1024);
                    std::uint64_t off = rng() % (stripe - len);
                    auto data = pattern(base + off, len, std::uint32_t(t * 1000 + i));
                    if (nbd_pwrite(h, data.data(), len, base + off, 0) != 0)
                        throw std::runtime_error("pwrite: " + nbd_error());
                    std::copy(data.begin(), data.end(), shadow.begin() + off);
                    std::uint64_t roff = rng() % (stripe - len);
                    std::vector<std::uint8_t> got(len);
                    if (nbd_pread(h, got.data(), len, base + roff, 0) != 0)
                        throw std::runtime_error("pread: " + nbd_error());
                    if (!std::equal(got.begin(), got.end(), shadow.begin() + roff))
                        throw std::runtime_error("data mismatch at " +
                                                 std::to_string(base + roff));
                }
            } catch (const std::exception& e) {
                errors[t] = e.what();
                ++failures;
            }
        });
    }
    for (auto& th : pool) th.join();
    for (int t = 0; t < threads; ++t) CHECK_MESSAGE(errors[t] == "", "thread " << t);
    CHECK(failures == 0);
    CHECK(d.stop() == 0);
}
