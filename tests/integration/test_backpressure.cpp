// A client that sends many large reads and never reads the replies:
// the daemon must apply back-pressure on that connection instead of buffering
// gigabytes, and keep serving everyone else. The memory bound is generous
// (the per-connection in-flight limit defaults to 64 MiB); a daemon without
// back-pressure would queue 2 GiB of replies here. Its large reads are sent
// from the RAM device's own pages, so they also must not keep the pages that
// other clients trim meanwhile.
#include <doctest/doctest.h>

#include <chrono>
#include <cstdint>
#include <libnbd.h>
#include <set>
#include <span>
#include <string>
#include <thread>

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
