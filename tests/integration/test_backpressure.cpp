// A client that sends many large reads and never reads the replies:
// the daemon must apply back-pressure on that connection instead of buffering
// gigabytes, and keep serving everyone else. The memory bound is generous
// (the per-connection in-flight limit defaults to 64 MiB); a daemon without
// back-pressure would queue 2 GiB of replies here.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "daemon.hpp"
#include "nbd_handle.hpp"
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
