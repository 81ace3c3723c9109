// A client that sends many large reads and never reads the replies:
// the daemon must apply back-pressure on that connection instead of buffering
// gigabytes, and keep serving everyone else. The memory bound is generous
// (the per-connection in-flight limit defaults to 64 MiB); a daemon without
// back-pressure would queue 2 GiB of replies here. Its large reads are sent
// from the RAM device's own pages, so they also must not keep the pages that
// other clients trim meanwhile. A tenant whose clients hold a device's
// whole in-flight budget that way keeps no other tenant of it waiting.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <libnbd.h>
#include <memory>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"
#include "raw_client.hpp"

using namespace nbdsched::testlib;

TEST_CASE("a client that never reads its replies cannot make the daemon buffer without bound") {
    Daemon d(standard_spec());
    if (nbdkit_mode()) {
        MESSAGE("nbdkit stand-in: only checking that others are served");
    }
    {
        RawClient greedy(d.socket_path());
        greedy.open_export("default");
        // 64 reads of 32 MiB: 2 GiB of replies nobody collects.
        for (std::uint64_t i = 0; i < 64; ++i)
            greedy.send(RawClient::request(READ, i + 1, (i % 2) * (32ull << 20), 32u << 20));
        // Meanwhile another client is served, repeatedly.
        Nbd h = connect(d.uri());
        for (std::uint32_t i = 0; i < 20; ++i) {
            REQUIRE(write_pattern(h, 65536, 65536 * i, i) == 0);
            CHECK(verify_pattern(h, 65536, 65536 * i, i) == "");
        }
        long peak = peak_rss_kib(d.pid());
        MESSAGE("daemon peak RSS " << peak / 1024 << " MiB");
        REQUIRE(peak > 0);
        if (!nbdkit_mode()) CHECK(peak < 768 * 1024);
    }
    CHECK(d.running());
    CHECK(d.stop() == 0);
}

// Replies of 64 KiB and more leave from the device's pages, pinned until
// sent. A client that stops reading (a paused VM) would keep that pin, and
// every page trimmed after it began could not be freed: a tenant writing and
// trimming the same MiB grew the daemon by a MiB a round, past the device's
// size. After 100 ms without room the rest of its replies is copied instead.
TEST_CASE("a client that stops reading does not keep the pages other clients trim") {
    Daemon d(standard_spec());
    Nbd h = connect(d.uri());
    constexpr std::uint64_t mib = 1 << 20, reads_at = 16 * mib;
    constexpr int reads = 8, rounds = 300;
    REQUIRE(write_pattern(h, reads * mib, reads_at, 7) == 0);

    RawClient stalled(d.socket_path());
    stalled.open_export("default");
    for (int i = 0; i < reads; ++i) stalled.send(RawClient::request(READ, i + 1, reads_at + i * mib, mib));
    std::this_thread::sleep_for(std::chrono::milliseconds(500));   // past the 100 ms after which it counts as stalled

    const long before = rss_kib(d.pid());
    for (int i = 0; i < rounds; ++i) {
        REQUIRE(write_pattern(h, mib, 0, i) == 0);
        REQUIRE(nbd_trim(h, mib, 0, 0) == 0);
    }
    const long grown_mib = (rss_kib(d.pid()) - before) / 1024;
    MESSAGE("daemon RSS grew " << grown_mib << " MiB over " << rounds << " rounds of a 1 MiB write and its trim");
    if (!nbdkit_mode()) CHECK(grown_mib < 32);   // pinned: about one MiB a round

    // The stalled client's replies, copied out of the pages, are the data.
    std::set<std::uint64_t> answered;
    for (int i = 0; i < reads; ++i) {
        auto reply = stalled.receive(mib);
        REQUIRE(reply);
        REQUIRE(reply->cookie >= 1);
        REQUIRE(reply->cookie <= static_cast<std::uint64_t>(reads));
        CHECK(answered.insert(reply->cookie).second);
        CHECK(reply->error == 0);
        REQUIRE(reply->data.size() == mib);
        CHECK(is_pattern(std::as_bytes(std::span(reply->data)), reads_at + (reply->cookie - 1) * mib, 7));
    }
    CHECK(d.running());
    CHECK(d.stop() == 0);
}

namespace {

// Whether a 4 KiB READ on `h` is answered within `limit`.
bool read_answered_within(nbd_handle* h, std::chrono::milliseconds limit) {
    std::vector<std::uint8_t> buf(4096);
    const auto cookie = nbd_aio_pread(h, buf.data(), buf.size(), 0, {}, 0);
    REQUIRE_MESSAGE(cookie >= 0, nbd_error());
    const auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
        REQUIRE_MESSAGE(nbd_poll(h, 50) >= 0, nbd_error());
        if (nbd_aio_command_completed(h, cookie) == 1) return true;
    }
    return false;
}

}   // namespace

// Tenant b's clients hold more than the device's whole in-flight budget and
// may hold it for good: replies they never read, WRITE payloads they never
// send (a paused VM). Tenant a, another group on the same device, must still
// be admitted: each group's share of the budget is its own (by weight), so a
// tenant can block only itself. Once with the bytes full, once with the
// request slots full.
TEST_CASE("a tenant holding the whole in-flight budget of a device does not keep another tenant waiting") {
    struct Case {
        const char* what;
        const char* limits;
        int readers;          // connections sending reads they never collect...
        int reads;            // ...this many each
        std::uint32_t size;   // of this size
        int writers;          // connections sending only the header of a WRITE of `size`
    };
    const Case cases[] = {
        {"bytes",
         "  max_request_bytes: 4MiB\n  max_inflight_bytes_per_connection: 8MiB\n"
         "  max_inflight_bytes_per_device: 32MiB\n",
         3, 3, 4u << 20, 8},
        {"requests", "  max_inflight_per_device: 8\n", 0, 0, 64u << 10, 8},
    };
    for (const auto& c : cases) {
        const std::string what = c.what;
        CAPTURE(what);
        Daemon d(yaml_spec(std::string("limits:\n") + c.limits +
                           "devices:\n  - {name: d0, size: 256MiB, scheduler: cfq}\n"
                           "groups:\n  - {name: ta, weight: 1000}\n  - {name: tb, weight: 100}\n"
                           "exports:\n  - {name: a, device: d0, group: ta}\n  - {name: b, device: d0, group: tb}\n"));
        std::vector<std::unique_ptr<RawClient>> held;
        for (int i = 0; i < c.readers; ++i) {
            auto& r = held.emplace_back(std::make_unique<RawClient>(d.socket_path()));
            r->open_export("b");
            for (int k = 0; k < c.reads; ++k) r->send(RawClient::request(READ, k + 1, k * std::uint64_t{c.size}, c.size));
        }
        for (int i = 0; i < c.writers; ++i) {
            auto& w = held.emplace_back(std::make_unique<RawClient>(d.socket_path()));
            w->open_export("b");
            w->send(RawClient::request(WRITE, 1, i * std::uint64_t{c.size}, c.size));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(500));   // the daemon reads their headers
        Nbd a = connect(d.uri("a"));
        // Before, it waited for as long as tenant b's clients stayed.
        CHECK_MESSAGE(read_answered_within(a, std::chrono::seconds(2)), "tenant a's 4 KiB READ not answered in 2 s");
        held.clear();
        CHECK(d.stop() == 0);
    }
}
