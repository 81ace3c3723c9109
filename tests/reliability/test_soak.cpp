// Bounded soak (suite 'slow'): libnbd model clients (writes, FUA, verified
// reads, trims, write-zeroes, flushes) and fio verify jobs on four devices
// (cfq and bfq, emulated hdd and ssd, RAM and file) for SOAK_SECONDS
// (default 120). No request may fail or take longer than the stuck bound,
// no data may differ, and the daemon's RSS must level off: it prints
// start/peak/end and checks the second half of the run grows by little.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <thread>
#include <vector>

#include "daemon.hpp"
#include "model_client.hpp"

extern char** environ;

using namespace nbdsched::reliability;
using namespace nbdsched;
using namespace nbdsched::testlib;
using namespace std::chrono_literals;

namespace {

struct Dev {
    const char* name;
    const char* backend;
    const char* scheduler;
    const char* profile;
    const char* group;
};
constexpr Dev devs[] = {
    {"cfq-hdd-ram", "ram", "cfq", "hdd", "gold"},
    {"bfq-ssd-file", "file", "bfq", "ssd", "silver"},
    {"bfq-hdd-file", "file", "bfq", "hdd", "gold"},
    {"cfq-ssd-ram", "ram", "cfq", "ssd", "silver"},
};

std::string soak_config(const testlib::TempDir& images) {
    std::string s = "devices:\n";
    for (const auto& d : devs) {
        s += std::string("  - name: ") + d.name + "\n    backend: " + d.backend + "\n    size: 64MiB\n" +
             "    scheduler: " + d.scheduler + "\n    profile: " + d.profile + "\n    read_ahead_cache: 8MiB\n";
        if (std::string(d.backend) == "file") s += "    path: \"" + images.file(std::string(d.name) + ".img") + "\"\n";
    }
    s += "exports:\n";
    for (const auto& d : devs)
        s += std::string("  - {name: ") + d.name + ", device: " + d.name + ", group: " + d.group + "}\n";
    s += "groups:\n  - {name: gold, weight: 500}\n  - {name: silver, weight: 100}\n";
    return s;
}

// fio with crc32c verification on [0, 32 MiB) of one export, in a loop until
// `until`; returns "" or what went wrong.
std::string fio_loop(const std::string& uri, const std::string& out, std::chrono::steady_clock::time_point until,
                     int& runs) {
    while (std::chrono::steady_clock::now() + 5s < until) {
        std::vector<std::string> args = {"fio", "--name=soak", "--ioengine=nbd", "--uri=" + uri,
                                         "--rw=randrw", "--bsrange=512-64k", "--size=32M", "--iodepth=8", "--verify=crc32c",
                                         "--verify_fatal=1", "--runtime=10", "--output-format=terse", "--terse-version=3"};
        std::vector<char*> argv;
        for (auto& a : args) argv.push_back(a.data());
        argv.push_back(nullptr);
        posix_spawn_file_actions_t fa;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_addopen(&fa, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        pid_t pid = -1;
        int rc = posix_spawnp(&pid, "fio", &fa, nullptr, argv.data(), environ);
        posix_spawn_file_actions_destroy(&fa);
        if (rc != 0) return "cannot run fio";
        int status = 0;
        waitpid(pid, &status, 0);
        std::ifstream f(out);
        std::stringstream text;
        text << f.rdbuf();
        const std::string s = text.str();
        auto line = s.find("3;");
        std::string err = "?";
        if (line != std::string::npos) {   // terse v3: field 5 is the error code
            std::size_t p = line;
            for (int i = 0; i < 4 && p != std::string::npos; ++i) p = s.find(';', p + 1);
            if (p != std::string::npos) err = s.substr(p + 1, s.find(';', p + 1) - p - 1);
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || err != "0")
            return "fio on " + uri + " failed (error " + err + "):\n" + s.substr(0, 2000);
        ++runs;
    }
    return "";
}

bool have_fio() { return std::system("fio --enghelp 2>/dev/null | grep -qw nbd") == 0; }

}   // namespace

TEST_CASE("soak: many clients on cfq/bfq, hdd/ssd, ram/file devices") {
    const char* env = std::getenv("SOAK_SECONDS");
    const int seconds = env ? std::atoi(env) : 120;
    // A request slower than this is stuck: fifo_expire (<= 250 ms) plus
    // emulated device time for a queue of requests, with a wide margin for
    // a loaded CI machine.
    const auto stuck = 10s;
    testlib::TempDir images;
    Daemon d(yaml_spec(soak_config(images)));
    const auto t0 = std::chrono::steady_clock::now();
    const auto until = t0 + std::chrono::seconds(seconds);

    std::vector<std::unique_ptr<ModelClient>> clients;
    std::uint64_t seed = 1;
    for (const auto& dev : devs)
        for (int c = 0; c < 2; ++c)   // two model clients per device, above fio's 32 MiB
            clients.push_back(std::make_unique<ModelClient>(d.uri(dev.name), (32ull << 20) + c * (16ull << 20),
                                                            16ull << 20, seed++));
    const bool fio = have_fio();
    std::vector<std::thread> fios;
    std::vector<std::string> fio_errors(2);
    std::vector<int> fio_runs(2, 0);
    if (fio)
        for (int i = 0; i < 2; ++i)   // fio on one hdd and one ssd device
            fios.emplace_back([&, i] {
                fio_errors[i] = fio_loop(d.uri(devs[i].name), images.file("fio" + std::to_string(i) + ".out"),
                                         until, fio_runs[i]);
            });

    long start = 0, peak = 0, mid = 0, end = 0;
    while (std::chrono::steady_clock::now() < until && d.running()) {
        std::this_thread::sleep_for(1s);
        const long now = rss_kib(d.pid());
        const auto elapsed = std::chrono::steady_clock::now() - t0;
        if (elapsed < 10s || start == 0) start = now;   // after clients zeroed their regions
        if (elapsed <= std::chrono::seconds(seconds) / 2) mid = now;
        peak = std::max(peak, now);
        end = now;
    }
    for (auto& t : fios) t.join();
    ModelStats total;
    for (auto& c : clients) {
        c->stop();
        auto s = c->stats();
        CHECK_MESSAGE(s.error == "", s.error);
        total.requests += s.requests;
        total.reads_verified += s.reads_verified;
        total.trims += s.trims;
        total.zeroes += s.zeroes;
        total.flushes += s.flushes;
        total.max_latency = std::max(total.max_latency, s.max_latency);
    }
    for (const auto& e : fio_errors) CHECK_MESSAGE(e == "", e);
    peak = std::max(peak, peak_rss_kib(d.pid()));
    std::printf("soak: %d s, 4 devices, %zu libnbd clients: %llu requests (%llu verified reads, %llu trims, "
                "%llu write-zeroes, %llu flushes), max latency %lld ms; fio verify runs: %d + %d%s\n",
                seconds, clients.size(), (unsigned long long)total.requests,
                (unsigned long long)total.reads_verified, (unsigned long long)total.trims,
                (unsigned long long)total.zeroes, (unsigned long long)total.flushes,
                (long long)std::chrono::duration_cast<std::chrono::milliseconds>(total.max_latency).count(),
                fio_runs[0], fio_runs[1], fio ? "" : " (fio without the nbd engine: skipped)");
    std::printf("soak: daemon RSS start %ld MiB, mid %ld MiB, peak %ld MiB, end %ld MiB\n", start / 1024,
                mid / 1024, peak / 1024, end / 1024);
    CHECK(total.requests > 0);
    CHECK(total.max_latency < stuck);
    // Data (2 x 64 MiB RAM) and caches fill in the first half; after that
    // the daemon must not keep growing.
    CHECK(end - mid < 48 * 1024);
    CHECK(d.running());
    CHECK(d.stop(SIGTERM) == 0);
}
