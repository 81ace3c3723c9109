// Fault injection from the config (devices[].faults), end to end: the real
// daemon, libnbd clients, and the daemon's own counters through ctl stats.
// A client gets the configured NBD error for requests touching the faulty
// range, everything else on the same connection keeps working, and another
// client of the same device is not disturbed. A request whose storage does
// not answer (a long delay) holds up a forced shutdown only for the drain
// timeout: then the daemon exits 1, naming the device.
#include <doctest/doctest.h>

#include <libnbd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "tools.hpp"
#include "witness.hpp"

using namespace nbdsched::testlib;
using namespace std::chrono_literals;

namespace {

constexpr std::uint64_t bad = 1u << 20;        // faults: 1MiB ..
constexpr std::uint64_t bad_len = 64u << 10;   //   .. + 64KiB
constexpr std::uint64_t slow = 8u << 20;       // a slow 4KiB at 8MiB

std::string faulty_config(const std::string& control) {
    return "control: " + control + "\n"
                                   "devices:\n"
                                   "  - name: d0\n"
                                   "    size: 64MiB\n"
                                   "    faults:\n"
                                   "      - {op: read, error: EIO, offset: 1MiB, length: 64KiB}\n"
                                   "      - {op: write, error: ENOSPC, offset: 1MiB, length: 64KiB}\n"
                                   "      - {op: flush, error: EIO}\n"
                                   "      - {op: read, delay: 50ms, offset: 8MiB, length: 4KiB}\n"
                                   "exports:\n  - {name: default, device: d0}\n";
}

// The errno of a failed libnbd call, or 0 when it succeeded.
int errno_of(int rc) { return rc == 0 ? 0 : nbd_get_errno(); }

}   // namespace

TEST_CASE("configured faults reach the client as NBD errors; the connection and other clients carry on") {
    TempDir ctl_dir;
    const std::string control = ctl_dir.file("ctl.sock");
    Daemon d(yaml_spec(faulty_config(control)));
    Witness other(d.uri(), 16u << 20);   // a second client, away from the faults
    std::optional<Nbd> client(connect(d.uri()));
    nbd_handle* h = client->get();
    std::vector<char> buf(4096);

    // Reads touching the range fail with EIO: inside it, and straddling its start.
    CHECK(errno_of(nbd_pread(h, buf.data(), 4096, bad + 8192, 0)) == EIO);
    CHECK(errno_of(nbd_pread(h, buf.data(), 4096, bad - 2048, 0)) == EIO);
    // Writes there fail with ENOSPC; trims and zeroes there are not in a rule.
    CHECK(errno_of(nbd_pwrite(h, buf.data(), 4096, bad, 0)) == ENOSPC);
    CHECK(errno_of(nbd_trim(h, 4096, bad, 0)) == 0);
    CHECK(errno_of(nbd_flush(h, 0)) == EIO);

    // The same connection keeps working around the range.
    CHECK(errno_of(nbd_pread(h, buf.data(), 4096, bad - 4096, 0)) == 0);
    CHECK(errno_of(nbd_pread(h, buf.data(), 4096, bad + bad_len, 0)) == 0);
    REQUIRE(write_pattern(h, 65536, bad + bad_len, 9) == 0);
    CHECK(verify_pattern(h, 65536, bad + bad_len, 9) == "");

    // A delay rule slows only what it matches.
    auto t0 = std::chrono::steady_clock::now();
    CHECK(errno_of(nbd_pread(h, buf.data(), 4096, slow, 0)) == 0);
    CHECK(std::chrono::steady_clock::now() - t0 >= 50ms);

    // The other client kept going, without a single error.
    CHECK_MESSAGE(other.advances(), other.error());
    other.finish();

    const auto dev = device_stats(control, "d0");
    INFO(dev.dump(2));
    CHECK(dev.at("counters").at("errors") == 4);
    const auto& f = dev.at("faults");
    CHECK(f.at("errors") == 4);
    CHECK(f.at("read_errors") == 2);
    CHECK(f.at("write_errors") == 1);
    CHECK(f.at("flush_errors") == 1);
    CHECK(f.at("trim_errors") == 0);
    CHECK(f.at("enospc") == 1);
    CHECK(f.at("delayed") == 1);

    client.reset();
    // The shutdown flush goes through the faults too: it fails, and the
    // daemon says so in its exit code.
    const int rc = d.stop(SIGTERM);
    INFO(d.log());
    CHECK(rc == 1);
    CHECK(d.log().find("device d0: flush at shutdown failed: ") != std::string::npos);
    // Each failed request left a warning naming the device, the request and
    // the error (daemon/device/device.cpp data_done); the requests that succeeded did not.
    const std::string log = d.log();
    CHECK(log.find("device d0: read offset " + std::to_string(bad + 8192) +
                   " length 4096 failed: Input/output error") != std::string::npos);
    CHECK(log.find("device d0: read offset " + std::to_string(bad - 2048) +
                   " length 4096 failed: Input/output error") != std::string::npos);
    CHECK(log.find("device d0: write offset " + std::to_string(bad) +
                   " length 4096 failed: No space left on device") != std::string::npos);
    CHECK(log.find("device d0: FLUSH failed: Input/output error") != std::string::npos);
    CHECK(log.find("flush offset") == std::string::npos);
    CHECK(log.find("device d0: read offset " + std::to_string(bad - 4096) + " length 4096 failed") ==
          std::string::npos);
}

TEST_CASE("a device without faults reports none") {
    TempDir ctl_dir;
    const std::string control = ctl_dir.file("ctl.sock");
    Daemon d(yaml_spec("control: " + control +
                       "\ndevices:\n  - {name: d0, size: 16MiB}\nexports:\n  - {name: default, device: d0}\n"));
    const auto dev = device_stats(control, "d0");
    CHECK_FALSE(dev.contains("faults"));
    CHECK(d.stop(SIGTERM) == 0);
}

TEST_CASE("a forced shutdown waits for a write its storage does not answer at most the drain timeout") {
    // The write sleeps 60 s on an I/O thread; the drain timeout is set to 2 s.
    constexpr auto drain = std::chrono::seconds(2);
    Daemon d(yaml_spec("limits: {drain_timeout: 2s}\n"
                       "devices:\n  - {name: d0, size: 16MiB, faults: [{op: write, delay: 60s}]}\n"
                       "exports:\n  - {name: default, device: d0}\n"));
    Nbd client = connect(d.uri());
    std::vector<char> buf(4096, 'w');
    REQUIRE(nbd_aio_pwrite(client.get(), buf.data(), buf.size(), 0, NBD_NULL_COMPLETION, 0) > 0);
    REQUIRE(nbd_poll(client.get(), 100) >= 0);   // sent
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto asked = std::chrono::steady_clock::now();
    REQUIRE(kill(d.pid(), SIGTERM) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const int rc = d.stop(SIGTERM);   // again: without waiting for the request
    const auto took = std::chrono::steady_clock::now() - asked;
    INFO(d.log());
    CHECK(rc == 1);
    CHECK(d.log().find("device d0: 1 request(s) still waiting for the storage 2000 ms after the stop") !=
          std::string::npos);
    // Generous: the stop waited for the pool (drain) and maybe the flush (drain), not for the 60 s write.
    CHECK(took < 2 * drain + std::chrono::seconds(15));
}
