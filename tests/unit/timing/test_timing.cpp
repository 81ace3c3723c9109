#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "timing/capacity.hpp"
#include "timing/hdd_model.hpp"
#include "timing/profiles.hpp"
#include "timing/ssd_model.hpp"

using namespace nbdsched;
using namespace nbdsched::timing;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<DeviceModel> model(std::string_view profile, const Params& params = {}) {
    std::string error;
    auto m = make_model(profile, params, error);
    REQUIRE_MESSAGE(m, error);
    return m;
}

// Runs `ios` through the model keeping `depth` outstanding; returns the time
// the last completes. Deterministic: completion order is by completion time.
Time run(DeviceModel& m, const std::vector<Io>& ios, unsigned depth) {
    std::vector<Time> outstanding;
    Time now{}, last{};
    for (const Io& io : ios) {
        if (outstanding.size() >= depth) {
            auto first = std::min_element(outstanding.begin(), outstanding.end());
            now = std::max(now, *first);
            outstanding.erase(first);
        }
        Time done = m.submit(io, now);
        outstanding.push_back(done);
        last = std::max(last, done);
    }
    return last;
}

std::vector<Io> random_ios(std::size_t n, std::uint64_t length, std::uint64_t span, Op op = Op::read) {
    std::vector<Io> ios;
    std::uint64_t x = 88172645463325252ull;   // xorshift: deterministic offsets
    for (std::size_t i = 0; i < n; ++i) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        ios.push_back({op, (x % (span / length)) * length, length});
    }
    return ios;
}

std::vector<Io> sequential_ios(std::size_t n, std::uint64_t length) {
    std::vector<Io> ios;
    for (std::size_t i = 0; i < n; ++i) ios.push_back({Op::read, i * length, length});
    return ios;
}

double seconds(Time t) { return double(t.count()) / 1e9; }

}   // namespace

TEST_CASE("hdd: defaults look like a 7200 rpm SATA disk") {
    auto m = model("hdd");
    CHECK(m->rotational());
    CHECK(m->max_io_bytes() == 1280u * 1024);
    CHECK(m->optimal_io_bytes() == 0u);
    // Random 4k over the whole disk: 8-9 ms average access.
    auto ios = random_ios(2000, 4096, 1ull << 40);
    double per_io_ms = seconds(run(*m, ios, 1)) * 1e3 / double(ios.size());
    CHECK(per_io_ms > 8.0);
    CHECK(per_io_ms < 9.5);
    // Sequential 1 MiB: 150-200 MB/s.
    auto seq = model("hdd");
    double mb_s = 1000.0 * 1.048576 / seconds(run(*seq, sequential_ios(1000, 1 << 20), 1));
    CHECK(mb_s > 150);
    CHECK(mb_s < 200);
}

TEST_CASE("hdd: a continuation pays transfer only, anything else seeks and rotates") {
    HddModel m{HddParams{}};
    Io io{Op::read, 1 << 20, 4096};
    CHECK(m.service_time(io, 1 << 20) == m.transfer_time(4096));
    Nanos near = m.service_time(io, (1 << 20) + 4096);
    CHECK(near > m.transfer_time(4096) + m.rotational_latency());
    CHECK(m.rotational_latency() == Nanos(4'166'667));
    // Served one at a time: two requests submitted together finish in series.
    Time a = m.submit({Op::read, 0, 4096}, Time{});
    Time b = m.submit({Op::read, 4096, 4096}, Time{});
    CHECK(b == a + m.transfer_time(4096));
}

TEST_CASE("hdd: seek curve is monotonic from settle to full stroke") {
    HddParams p;
    HddModel m{p};
    Nanos previous{0};
    for (int i = 1; i <= 1000; ++i) {
        Nanos s = m.seek_time(p.capacity / 1000 * std::uint64_t(i));
        CHECK(s >= previous);
        previous = s;
    }
    CHECK(m.seek_time(1) >= p.settle);
    CHECK(m.seek_time(1) < p.settle + 100us);
    CHECK(m.seek_time(p.capacity) == p.full_stroke_seek);
    CHECK(m.seek_time(10 * p.capacity) == p.full_stroke_seek);   // clamped
}

TEST_CASE("hdd: sequential is far faster than random") {
    auto seq = model("hdd");
    auto rnd = model("hdd");
    Time t_seq = run(*seq, sequential_ios(500, 4096), 1);
    Time t_rnd = run(*rnd, random_ios(500, 4096, 1ull << 36), 1);
    CHECK(t_rnd.count() > 50 * t_seq.count());
}

TEST_CASE("ssd: IOPS scale with depth up to the channel count, then flatten") {
    auto iops = [](unsigned depth) {
        auto m = model("ssd");
        auto ios = random_ios(4000, 4096, 1ull << 34);
        return double(ios.size()) / seconds(run(*m, ios, depth));
    };
    double d1 = iops(1), d4 = iops(4), d8 = iops(8), d32 = iops(32);
    CHECK(d1 > 9000);
    CHECK(d1 < 11000);
    CHECK(d4 == doctest::Approx(4 * d1).epsilon(0.05));
    CHECK(d8 > 7.5 * d1);
    CHECK(d32 == doctest::Approx(8 / 100e-6).epsilon(0.02));   // channels / read_latency
    CHECK(d32 < 1.1 * d8);                                     // 8 channels: little gain past 8
    CHECK_FALSE(model("ssd")->rotational());
}

TEST_CASE("ssd: large transfers hit the bandwidth ceiling") {
    auto m = model("ssd", {{"bandwidth", "500MiB/s"}});
    auto ios = sequential_ios(2000, 128 * 1024);
    double bytes = 2000.0 * 128 * 1024;
    double rate = bytes / seconds(run(*m, ios, 32)) / (1024 * 1024);
    CHECK(rate == doctest::Approx(500).epsilon(0.02));
    auto nvme = model("nvme");
    double nvme_rate = bytes / seconds(run(*nvme, ios, 32)) / (1024 * 1024);
    CHECK(nvme_rate > 4 * rate);
}

TEST_CASE("nvme: deeper parallelism than ssd") {
    auto ios = random_ios(8000, 4096, 1ull << 34);
    auto ssd = model("ssd");
    auto nvme = model("nvme");
    CHECK(nvme->queue_depth() > ssd->queue_depth());
    double ssd_iops = double(ios.size()) / seconds(run(*ssd, ios, 64));
    double nvme_iops = double(ios.size()) / seconds(run(*nvme, ios, 64));
    CHECK(nvme_iops > 3 * ssd_iops);
}

TEST_CASE("profiles: overrides with units, validation") {
    auto m = model("hdd", {{"rpm", "5400"}, {"transfer_rate", "100MB/s"}, {"max_io", "512KiB"}});
    CHECK(m->max_io_bytes() == 512u * 1024);
    HddParams p;
    CHECK(read_hdd_params({{"rpm", "15000"}, {"avg_seek", "3ms"}, {"transfer_rate", "250"}}, p).empty());
    CHECK(p.rpm == 15000);
    CHECK(p.avg_seek == Nanos(3ms));
    CHECK(p.full_stroke_seek > p.avg_seek);   // derived from avg_seek, same curve shape
    HddParams q;
    CHECK(read_hdd_params({{"avg_seek", "8.5ms"}}, q).empty());
    CHECK(q.full_stroke_seek == Nanos(17'500'000));
    CHECK(p.transfer_rate == doctest::Approx(250.0 * 1024 * 1024));
    CHECK(check_profile("ssd", {{"channels", "4"}, {"read_latency", "50us"}, {"queue_depth", "64"}}).empty());
    CHECK(check_profile("none", {}).empty());
    CHECK_FALSE(check_profile("none", {{"rpm", "1"}}).empty());
    CHECK_FALSE(check_profile("floppy", {}).empty());
    CHECK_FALSE(check_profile("hdd", {{"rmp", "7200"}}).empty());   // typo
    CHECK_FALSE(check_profile("hdd", {{"rpm", "fast"}}).empty());
    CHECK_FALSE(check_profile("hdd", {{"avg_seek", "20ms"}, {"full_stroke_seek", "15ms"}}).empty());
    CHECK_FALSE(check_profile("hdd", {{"avg_seek", "8.8ms"}, {"full_stroke_seek", "9ms"}}).empty());   // non-monotonic fit
    CHECK_FALSE(check_profile("ssd", {{"channels", "0"}}).empty());
    CHECK_FALSE(check_profile("ssd", {{"bandwidth", "fast"}}).empty());
    CHECK_FALSE(check_profile("ssd", {{"max_io", "1000"}}).empty());
}

TEST_CASE("profiles: rates, durations and I/O sizes out of range are refused, not wrapped or clamped") {
    // A rate near 0 overflowed the transfer time (an instant device), inf made it free.
    for (const char* rate : {"1e-12", "inf", "infinity", "0", "-5", "1000B/s"}) {
        CAPTURE(rate);
        CHECK(check_profile("hdd", {{"transfer_rate", rate}}).find("transfer_rate") != std::string::npos);
        CHECK(check_profile("ssd", {{"bandwidth", rate}}).find("bandwidth") != std::string::npos);
    }
    CHECK(check_profile("hdd", {{"transfer_rate", "1KiB/s"}}).empty());
    CHECK(check_profile("hdd", {{"avg_seek", "100000h"}}).find("avg_seek") != std::string::npos);
    CHECK(check_profile("hdd", {{"full_stroke_seek", "11s"}}).find("full_stroke_seek") != std::string::npos);
    CHECK(check_profile("ssd", {{"read_latency", "1h"}}).find("read_latency") != std::string::npos);
    CHECK(check_profile("ssd", {{"read_latency", "10s"}}).empty());
    CHECK(check_profile("hdd", {{"max_io", "3GiB"}}).find("max_io") != std::string::npos);
    CHECK(check_profile("ssd", {{"max_io", "2GiB"}}).empty());
    CHECK(check_profile("ssd", {{"optimal_io", "4GiB"}}).find("optimal_io") != std::string::npos);
    std::string error;
    CHECK(make_model("none", {}, error) == nullptr);
    CHECK(error.empty());
}

TEST_CASE("capacity: what a profile serves, measured on a fresh model") {
    auto hdd = model("hdd");
    auto c = measure_capacity(*hdd, 1ull << 40);
    // 4.5 ms average seek + 4.17 ms half a turn: ~115 random 4 KiB reads a second over the whole disk.
    CHECK(c.iops > 100);
    CHECK(c.iops < 130);
    CHECK(c.bps > c.iops * 4096);   // 1 MiB reads move more bytes per seek
    auto ssd = model("ssd");
    CHECK(measure_capacity(*ssd, 1ull << 30).iops > 10 * c.iops);
}

TEST_CASE("capacity: the 1 MiB rate counts the 1 MiB reads' time only, not the 4 KiB batch before them") {
    constexpr double mib = 1 << 20;
    // A random 1 MiB read over the whole 1 TiB disk: 4.5 ms average seek +
    // 4.17 ms half a turn + 5.88 ms at 170 MiB/s = 14.55 ms, ~68.7 MiB/s.
    auto hdd = model("hdd");
    const double hdd_mib_s = measure_capacity(*hdd, 1ull << 40).bps / mib;
    CHECK(hdd_mib_s > 65);
    CHECK(hdd_mib_s < 72);
    // 1 MiB reads queued on flash: the link's bandwidth, exactly as the profile says.
    auto ssd = model("ssd");
    CHECK(measure_capacity(*ssd, 1ull << 30).bps / mib == doctest::Approx(530).epsilon(0.002));
    auto nvme = model("nvme");
    CHECK(measure_capacity(*nvme, 1ull << 30).bps / mib == doctest::Approx(3072).epsilon(0.002));
}
