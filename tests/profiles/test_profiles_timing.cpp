// Device profiles behave like their devices in time, through the real daemon
// and fio's nbd engine. Each assertion compares two runs of the same test
// process (ratios, never absolute speeds), with margins wide enough for a
// loaded machine: the emulated times are milliseconds, the daemon's own
// overhead microseconds.
#include <doctest/doctest.h>

#include <string>

#include "case_report.hpp"
#include "daemon.hpp"
#include "tools.hpp"

using namespace nbdsched;
using namespace nbdsched::testlib;

namespace {

constexpr double mib = 1 << 20;

// Read MB/s of `jobs` fio jobs, each reading its own 64 MiB region
// sequentially with `bs`, for `seconds`.
double parallel_sequential(const std::string& yaml, const std::string& bs, int jobs, int seconds) {
    Daemon d(profile_spec(yaml));
    auto report = fio(d.uri(), "--name=seq --rw=read --bs=" + bs + " --numjobs=" + std::to_string(jobs) +
                                   " --size=64M --offset_increment=64M --iodepth=1 --time_based --runtime=" +
                                   std::to_string(seconds));
    return read_bw(report) / mib;
}

}   // namespace

TEST_CASE("hdd: sequential 1 MiB reads are much faster than random 4 KiB reads") {
    SKIP_TEST_IF(fio_skip_reason());
    // read_ahead_kb 0: the disk model alone.
    Daemon d(profile_spec("    profile: hdd\n    read_ahead_kb: 0\n"));
    auto seq = fio(d.uri(), "--name=seq --rw=read --bs=1M --size=512M --iodepth=1 --time_based --runtime=2");
    auto rnd = fio(d.uri(), "--name=rnd --rw=randread --bs=4k --size=1G --iodepth=1 --time_based --runtime=2");
    double seq_mbs = read_bw(seq) / mib;
    double rnd_mbs = read_bw(rnd) / mib;
    MESSAGE("hdd: sequential 1M " << seq_mbs << " MiB/s, random 4k " << rnd_mbs << " MiB/s ("
                                  << read_iops(rnd) << " IOPS)");
    // Model: ~170 MiB/s against ~0.5-0.8 MiB/s (a seek and half a turn per 4k).
    CHECK(seq_mbs > 20 * rnd_mbs);
    CHECK(read_iops(rnd) < 400);   // an emulated 7200 rpm disk, not RAM
}

TEST_CASE("ssd: random-read IOPS grow with the queue depth (parallel channels)") {
    SKIP_TEST_IF(fio_skip_reason());
    // 1 ms per read (instead of 100us) keeps the daemon's CPU time small
    // against the emulated time even on a loaded machine.
    Daemon d(profile_spec("    profile: ssd\n    read_ahead_kb: 0\n    ssd:\n      read_latency: 1ms\n"));
    auto qd1 = fio(d.uri(), "--name=qd1 --rw=randread --bs=4k --size=256M --iodepth=1 --time_based --runtime=2");
    auto qd8 = fio(d.uri(), "--name=qd8 --rw=randread --bs=4k --size=256M --iodepth=8 --time_based --runtime=2");
    double iops1 = read_iops(qd1);
    double iops8 = read_iops(qd8);
    MESSAGE("ssd (read_latency 1ms, 8 channels): " << iops1 << " IOPS at depth 1, " << iops8 << " at depth 8");
    CHECK(iops1 < 1100);   // bounded by the latency: no more than ~1000/s
    CHECK(iops8 > 2 * iops1);
}

TEST_CASE("hdd: read-ahead auto (2560 KiB) beats 128 KiB for parallel sequential readers (seed 004)") {
    SKIP_TEST_IF(fio_skip_reason());
    double small = parallel_sequential("    profile: hdd\n    read_ahead_kb: 128\n", "128k", 4, 3);
    double autom = parallel_sequential("    profile: hdd\n    read_ahead_kb: auto\n", "128k", 4, 3);
    MESSAGE("hdd, 4 sequential readers, bs 128k: read_ahead_kb 128 " << small << " MiB/s, auto " << autom << " MiB/s");
    CHECK(autom > small);
}
