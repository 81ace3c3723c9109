// A client that sends many large reads and never reads the replies:
// the daemon must apply back-pressure on that connection instead of buffering
// gigabytes, and keep serving everyone else. The memory bound is generous
// (the per-connection in-flight limit defaults to 64 MiB); a daemon without
// back-pressure would queue 2 GiB of replies here.
#include <doctest/doctest.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "harness.hpp"
#include "nbd_client.hpp"
#include "raw_client.hpp"

using namespace nbdsched::itest;

namespace {

// Peak resident set size of a process, in KiB (VmHWM); -1 if unknown.
long peak_rss_kib(pid_t pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/status");
    std::string key;
    long value = -1;
    while (f >> key) {
        if (key == "VmHWM:") {
            f >> value;
            return value;
        }
        f.ignore(4096, '\n');
    }
    return -1;
}

} // namespace

TEST_CASE("a client that never reads its replies cannot make the daemon buffer without bound") {
    Daemon d(standard_spec());
    if (nbdkit_mode()) {
        MESSAGE("nbdkit stand-in: only checking that others are served");
    }
    {
        RawConn greedy(d.socket_path());
        greedy.open_export("default");
        // 64 reads of 32 MiB: 2 GiB of replies nobody collects.
        for (std::uint64_t i = 0; i < 64; ++i)
            greedy.send(RawConn::request(nbd::k_cmd_read, i + 1, (i % 2) * (32ull << 20),
                                         32u << 20));
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
