// Per-device in-flight limits (limits.max_inflight_per_device and
// max_inflight_bytes_per_device), end to end: several libnbd clients keep
// many asynchronous requests queued on one slow (hdd-profile) device; the
// daemon must hold the device to the limit by back-pressure -- every request
// completes, with the right data, none is refused -- and its own high-water
// mark (ctl stats) shows the limit was reached and never passed.
#include <doctest/doctest.h>

#include <libnbd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"
#include "tools.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr int clients = 4;
constexpr int requests_per_client = 32;

std::string slow_device(const std::string& control, const std::string& limits) {
    return "control: " + control + "\n"
                                   "devices:\n"
                                   "  - {name: d0, backend: ram, size: 256MiB, profile: hdd, scheduler: bfq}\n"
                                   "exports:\n  - {name: default, device: d0}\n"
                                   "limits:\n" +
           limits;
}

// Issues all of `len`-byte writes (then all reads) of one client's region at
// once and waits for them; returns "" or what went wrong.
std::string burst(const std::string& uri, int client, std::size_t len) {
    try {
        Nbd h = connect(uri);
        const std::uint64_t base = static_cast<std::uint64_t>(client) * (32u << 20);
        std::vector<std::vector<std::uint8_t>> bufs(requests_per_client);
        std::vector<std::int64_t> cookies;
        auto wait_all = [&](const char* what) -> std::string {
            while (nbd_aio_in_flight(h) > 0)
                if (nbd_poll(h, -1) == -1) return std::string(what) + ": poll: " + nbd_error();
            for (auto c : cookies)
                if (nbd_aio_command_completed(h, c) != 1) return std::string(what) + " failed: " + nbd_error();
            cookies.clear();
            return "";
        };
        for (int i = 0; i < requests_per_client; ++i) {
            // Spread over the region so the hdd model seeks: each takes ms.
            const std::uint64_t off = base + static_cast<std::uint64_t>((i * 7) % requests_per_client) * (1u << 20);
            bufs[i] = pattern(off, len, client);
            cookies.push_back(nbd_aio_pwrite(h, bufs[i].data(), len, off, NBD_NULL_COMPLETION, 0));
        }
        if (auto e = wait_all("write"); !e.empty()) return e;
        for (int i = 0; i < requests_per_client; ++i) {
            const std::uint64_t off = base + static_cast<std::uint64_t>((i * 7) % requests_per_client) * (1u << 20);
            bufs[i].assign(len, 0);
            cookies.push_back(nbd_aio_pread(h, bufs[i].data(), len, off, NBD_NULL_COMPLETION, 0));
        }
        if (auto e = wait_all("read"); !e.empty()) return e;
        for (int i = 0; i < requests_per_client; ++i) {
            const std::uint64_t off = base + static_cast<std::uint64_t>((i * 7) % requests_per_client) * (1u << 20);
            if (bufs[i] != pattern(off, len, client)) return "wrong data at offset " + std::to_string(off);
        }
        return "";
    } catch (const std::exception& e) {
        return e.what();
    }
}

// Runs `clients` bursts at once; returns the device's stats afterwards.
nlohmann::json run_clients(Daemon& d, const std::string& control, std::size_t len) {
    std::vector<std::string> errors(clients);
    std::vector<std::thread> threads;
    for (int c = 0; c < clients; ++c) threads.emplace_back([&, c] { errors[c] = burst(d.uri(), c, len); });
    for (auto& t : threads) t.join();
    for (int c = 0; c < clients; ++c) {
        INFO("client " << c);
        CHECK(errors[c] == "");
    }
    return device_stats(control, "d0");
}

}   // namespace

TEST_CASE("max_inflight_per_device holds a device's requests to the limit, by waiting, not refusing") {
    TempDir ctl_dir;
    const std::string control = ctl_dir.file("ctl.sock");
    Daemon d(yaml_spec(slow_device(control, "  max_inflight_per_device: 4\n")));
    const auto dev = run_clients(d, control, 65536);
    INFO(dev.dump(2));
    const auto& inflight = dev.at("inflight");
    CHECK(inflight.at("max_requests") == 4);
    CHECK(inflight.at("peak_requests") == 4);      // reached ...
    CHECK(inflight.at("waits").get<long>() > 0);   // ... and held by back-pressure
    CHECK(inflight.at("requests") == 0);
    CHECK(inflight.at("bytes") == 0);
    const auto& counters = dev.at("counters");
    CHECK(counters.at("writes") == clients * requests_per_client);
    CHECK(counters.at("reads") == clients * requests_per_client);
    CHECK(counters.at("errors") == 0);
    CHECK(d.stop(SIGTERM) == 0);
}

TEST_CASE("max_inflight_bytes_per_device: at most one request beyond the byte budget") {
    TempDir ctl_dir;
    const std::string control = ctl_dir.file("ctl.sock");
    // A budget of exactly one maximal request: each one alone must pass.
    Daemon d(yaml_spec(slow_device(control, "  max_request_bytes: 256KiB\n  max_inflight_bytes_per_device: 256KiB\n")));
    const auto dev = run_clients(d, control, 192u << 10);
    INFO(dev.dump(2));
    const auto& inflight = dev.at("inflight");
    const auto peak = inflight.at("peak_bytes").get<std::uint64_t>();
    CHECK(peak >= 256u << 10);
    CHECK(peak < (256u << 10) + (192u << 10));
    CHECK(inflight.at("waits").get<long>() > 0);
    CHECK(inflight.at("bytes") == 0);
    CHECK(dev.at("counters").at("errors") == 0);
    CHECK(d.stop(SIGTERM) == 0);
}

namespace {

// libnbd completion callback: counts finished reads of the bursting client.
int count_completion(void* user_data, int* /*error*/) {
    static_cast<std::atomic<int>*>(user_data)->fetch_add(1);
    return 1;   // auto-retire the command
}

}   // namespace

TEST_CASE("a full device serves waiting connections in turn: a bursting client cannot take every freed slot") {
    TempDir ctl_dir;
    const std::string control = ctl_dir.file("ctl.sock");
    // scheduler none: the device serves requests in the order they were
    // admitted, so the order of admission is what the test observes.
    Daemon d(yaml_spec("control: " + control + "\n"
                                               "devices:\n"
                                               "  - {name: d0, backend: ram, size: 256MiB, profile: hdd, scheduler: none}\n"
                                               "exports:\n  - {name: default, device: d0}\n"
                                               "limits:\n  max_inflight_per_device: 2\n"));
    constexpr int burst_reads = 64;
    std::atomic<int> burst_done{0};
    std::string burst_error;
    std::thread burster([&] {
        try {
            Nbd h = connect(d.uri());
            std::vector<std::uint8_t> buf(4096 * burst_reads);
            for (int i = 0; i < burst_reads; ++i) {
                // Far apart: every read seeks (~9 ms on the hdd profile).
                const std::uint64_t off = static_cast<std::uint64_t>((i * 37) % burst_reads) * (2u << 20);
                if (nbd_aio_pread(h, buf.data() + 4096 * i, 4096, off,
                                  nbd_completion_callback{.callback = count_completion, .user_data = &burst_done, .free = nullptr},
                                  0) == -1)
                    throw std::runtime_error(nbd_error());
            }
            while (nbd_aio_in_flight(h) > 0)
                if (nbd_poll(h, -1) == -1) throw std::runtime_error(nbd_error());
        } catch (const std::exception& e) {
            burst_error = e.what();
        }
    });
    // The late client arrives once the burster's requests fill the device
    // and the rest wait behind the limit.
    while (burst_done.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    Nbd late = connect(d.uri());
    std::vector<std::uint8_t> one(4096);
    REQUIRE(nbd_pread(late, one.data(), one.size(), 200u << 20, 0) == 0);
    const int burst_done_when_late_finished = burst_done.load();
    burster.join();
    CHECK(burst_error == "");
    CHECK(burst_done.load() == burst_reads);
    INFO("the burster had finished " << burst_done_when_late_finished << " of " << burst_reads
                                     << " reads when the late client's one read completed");
    // In turn: the late read is admitted after at most the burster's one
    // request already in line, so it completes a few seeks later, not after
    // the burster's whole backlog.
    CHECK(burst_done_when_late_finished < burst_reads / 2);
    CHECK(device_stats(control, "d0").at("inflight").at("waits").get<long>() > 0);
    CHECK(d.stop(SIGTERM) == 0);
}
