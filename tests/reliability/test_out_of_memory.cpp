// A RAM device that runs out of memory, for real: the running daemon's
// address space is capped (prlimit), so its page allocator's mmap fails.
// Writes then fail with ENOSPC, both a 1 MiB payload meant to be received
// straight into the device's pages (Unix) and a 4 KiB one that came with its
// header (TCP), and the daemon goes on serving: what was acknowledged reads
// back, a TRIM gives pages back and writes succeed again, the log holds a
// few lines and a count instead of a line per failed request, and SIGTERM
// still ends it with status 0 although no thread can be started for the
// shutdown's flush. Release build only (the slow suite): a sanitizer's own
// memory map does not survive the cap.
#include <doctest/doctest.h>

#include <libnbd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <fstream>
#include <string>
#include <sys/resource.h>

#include "case_report.hpp"
#include "common/sanitizers.hpp"
#include "daemon.hpp"
#include "nbd_handle.hpp"

using namespace nbdsched::testlib;

#if defined(NBDSCHED_ASAN) || defined(NBDSCHED_TSAN)
TEST_CASE("out of memory: writes fail with ENOSPC, the rest serves, a TRIM gives room back, the stop is clean") {
    SKIP_TEST("a sanitizer's shadow memory does not survive an address-space cap (run it on a release build)");
}
#else
namespace {

constexpr std::uint64_t k_mib = 1ull << 20;

// VmSize of a process in bytes, from /proc (0 if unknown).
std::uint64_t address_space_bytes(pid_t pid) {
    std::ifstream status("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("VmSize:", 0) == 0) return std::stoull(line.substr(7)) * 1024;
    return 0;
}

std::size_t count_lines_with(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
}

}   // namespace

TEST_CASE("out of memory: writes fail with ENOSPC, the rest serves, a TRIM gives room back, the stop is clean") {
    ServerSpec spec;
    spec.devices.push_back(device("d0", "ram", 1ull << 30));
    spec.exports.push_back(export_of("default", "d0"));
    Daemon d(spec);
    const auto began = std::chrono::steady_clock::now();
    {
        Nbd unix_h = connect(d.uri());
        Nbd tcp_h = connect(d.tcp_uri());
        const std::uint64_t vm = address_space_bytes(d.pid());
        REQUIRE(vm > 0);
        const rlimit cap{vm + 48 * k_mib, vm + 48 * k_mib};
        REQUIRE_MESSAGE(::prlimit(d.pid(), RLIMIT_AS, &cap, nullptr) == 0, "prlimit: ", errno);

        std::uint64_t written = 0;
        int error = 0;
        for (; written < 512; ++written) {
            if (write_pattern(unix_h, k_mib, written * k_mib, 1) != 0) {
                error = nbd_get_errno();
                break;
            }
        }
        INFO("1 MiB writes acknowledged before the first failure: ", written);
        CHECK(written >= 1);
        CHECK(written < 512);
        CHECK(error == ENOSPC);

        int small_failures = 0, small_other = 0;
        for (int i = 0; i < 300; ++i) {
            if (write_pattern(tcp_h, 4096, 900 * k_mib + i * 8192ull, 3) == 0) continue;
            ++(nbd_get_errno() == ENOSPC ? small_failures : small_other);
        }
        CHECK(small_failures >= 250);   // a few may land in pages the allocator already held
        CHECK(small_other == 0);
        CHECK(d.running());

        for (std::uint64_t i = 0; i < written; ++i) CHECK(verify_pattern(tcp_h, k_mib, i * k_mib, 1) == "");
        REQUIRE_MESSAGE(nbd_trim(unix_h, written * k_mib, 0, 0) == 0, nbd_error());
        CHECK(write_pattern(unix_h, k_mib, 0, 2) == 0);
        CHECK(verify_pattern(tcp_h, k_mib, 0, 2) == "");
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    CHECK(d.stop(SIGTERM) == 0);
    const std::string log = d.log();
    const auto logged = count_lines_with(log, "failed: No space left on device");
    INFO("failure lines logged in ", seconds, " s: ", logged);
    CHECK(logged >= 1);
    CHECK(logged <= 10 * (static_cast<std::size_t>(seconds / 5) + 2));
}
#endif
