// Read-ahead in the daemon's request path (daemon/device/readahead_path.hpp) through
// a real Device built by setup.cpp: RAM backend, `none` scheduler, optional
// timing model. Requests go in through Device::submit as a connection would
// send them; completions come back on the io_context.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "daemon/device/device.hpp"
#include "daemon/process/setup.hpp"

using namespace nbdsched;
using namespace std::chrono_literals;

namespace {

std::byte pattern_byte(std::uint64_t offset, unsigned seed) {
    return static_cast<std::byte>((offset * 131 + offset / 4096 + seed * 17) & 0xff);
}

struct Rig final : daemon::RequestSink {
    boost::asio::io_context io;
    boost::asio::thread_pool pool{1};
    std::unique_ptr<daemon::Device> dev;
    std::deque<daemon::IoRequest> reqs;
    std::size_t done = 0;
    std::size_t failed = 0;
    sched::QueueId queue = 0;

    explicit Rig(const std::string& profile, std::optional<std::uint64_t> read_ahead_kb,
                 std::uint64_t cache = 64ull << 20, std::uint64_t size = 64ull << 20,
                 std::map<std::string, std::string> profile_params = {}) {
        config::Config config;
        config.groups.push_back({});
        config.groups.back().name = "default";
        config::Device d;
        d.name = "d0";
        d.size = size;
        d.profile = profile;
        d.profile_params = std::move(profile_params);
        d.read_ahead_kb = read_ahead_kb;
        d.read_ahead_cache = cache;
        std::string error;
        dev = daemon::build_device(io, pool, d, config, error);
        REQUIRE_MESSAGE(dev, error);
        queue = dev->open_queue(0);
    }
    ~Rig() {
        pool.join();
    }

    void request_done(daemon::IoRequest& r) override {
        ++done;
        if (r.backend_errno != 0) ++failed;
    }

    daemon::IoRequest& add(sched::Op op, std::uint64_t offset, std::uint64_t length) {
        auto& r = reqs.emplace_back();
        r.sink = this;
        r.op = op;
        r.offset = offset;
        r.length = length;
        r.queue = queue;
        r.buffer.reserve(length ? length : 1);
        return r;
    }
    daemon::IoRequest& read(std::uint64_t offset, std::uint64_t length) {
        auto& r = add(sched::Op::read, offset, length);
        dev->submit(r);
        return r;
    }
    void write(std::uint64_t offset, std::uint64_t length, unsigned seed) {
        auto& r = add(sched::Op::write, offset, length);
        for (std::uint64_t i = 0; i < length; ++i) r.buffer.data()[i] = pattern_byte(offset + i, seed);
        dev->submit(r);
    }
    // Runs the loop until every submitted request was answered.
    void settle() {
        io.restart();   // run_one_for() stops the context whenever it ran out of work
        auto deadline = std::chrono::steady_clock::now() + 10s;
        while (done < reqs.size() && std::chrono::steady_clock::now() < deadline) {
            io.run_one_for(50ms);
            io.restart();
        }
        REQUIRE(done == reqs.size());
        // Prefetches still in flight complete on their own; let them land.
        while (dev->read_ahead_stats() && dev->read_ahead_stats()->bytes_inflight != 0 &&
               std::chrono::steady_clock::now() < deadline) {
            io.run_one_for(50ms);
            io.restart();
        }
    }
    static bool matches(daemon::IoRequest& r, unsigned seed) {
        for (std::uint64_t i = 0; i < r.length; ++i)
            if (r.buffer.data()[i] != pattern_byte(r.offset + i, seed)) return false;
        return true;
    }
};

constexpr std::uint64_t kib = 1024;

}   // namespace

TEST_CASE("sequential reads are served from the read-ahead cache, with the right data") {
    Rig rig("none", 256);
    rig.write(0, 8ull << 20, 1);
    rig.settle();
    std::vector<daemon::IoRequest*> reads;
    for (std::uint64_t off = 0; off < (4ull << 20); off += 64 * kib) {
        reads.push_back(&rig.read(off, 64 * kib));
        rig.settle();
    }
    for (auto* r : reads) CHECK(Rig::matches(*r, 1));
    auto s = *rig.dev->read_ahead_stats();
    CHECK(s.window_bytes == 256 * kib);
    CHECK(s.hits > reads.size() / 2);
    CHECK(s.bytes_prefetched >= 2ull << 20);
    CHECK(s.bytes_inflight == 0);
    CHECK(rig.dev->outstanding() == 0);
}

TEST_CASE("a write into cached read-ahead data is seen by the next read") {
    Rig rig("none", 512);
    rig.write(0, 4ull << 20, 1);
    rig.settle();
    for (std::uint64_t off = 0; off < (1ull << 20); off += 128 * kib) rig.read(off, 128 * kib);
    rig.settle();
    REQUIRE(rig.dev->read_ahead_stats()->bytes_cached > 0);
    // Inside the window prefetched past the last read.
    rig.write((1ull << 20) + 4 * kib, 8 * kib, 2);
    rig.settle();
    auto& r = rig.read(1ull << 20, 128 * kib);
    rig.settle();
    for (std::uint64_t i = 0; i < r.length; ++i) {
        std::uint64_t at = r.offset + i;
        unsigned seed = at >= (1ull << 20) + 4 * kib && at < (1ull << 20) + 12 * kib ? 2 : 1;
        REQUIRE(r.buffer.data()[i] == pattern_byte(at, seed));
    }
    CHECK(rig.dev->read_ahead_stats()->bytes_invalidated > 0);
}

TEST_CASE("a write into a window being prefetched: the stale prefetch is dropped") {
    // The ssd model keeps every read in flight for its latency, so the
    // write lands while the prefetch that read the old data is pending. A
    // long latency: a completion whose time has passed when its data copy
    // ends is answered at once, and a sanitized build copies slowly.
    Rig rig("ssd", 512, 64ull << 20, 64ull << 20, {{"read_latency", "200ms"}});
    rig.write(0, 4ull << 20, 1);
    rig.settle();
    for (std::uint64_t off = 0; off < (512 * kib); off += 128 * kib) rig.read(off, 128 * kib);
    // No settling: prefetches are queued or in flight now.
    REQUIRE(rig.dev->read_ahead_stats()->bytes_inflight > 0);
    rig.write(600 * kib, 4 * kib, 3);
    rig.settle();
    auto& r = rig.read(512 * kib, 256 * kib);
    rig.settle();
    for (std::uint64_t i = 0; i < r.length; ++i) {
        std::uint64_t at = r.offset + i;
        unsigned seed = at >= 600 * kib && at < 604 * kib ? 3 : 1;
        REQUIRE(r.buffer.data()[i] == pattern_byte(at, seed));
    }
    CHECK(rig.dev->read_ahead_stats()->prefetches_dropped > 0);
    CHECK(rig.failed == 0);
}

TEST_CASE("read-ahead memory stays within read_ahead_cache") {
    const std::uint64_t cache = 1ull << 20;
    Rig rig("none", 512, cache);
    std::uint64_t peak = 0;
    // Many interleaved streams from several queues, each wanting its window.
    std::vector<sched::QueueId> queues;
    for (int q = 0; q < 4; ++q) queues.push_back(rig.dev->open_queue(0));
    for (int round = 0; round < 16; ++round) {
        for (std::size_t q = 0; q < queues.size(); ++q) {
            for (int stream = 0; stream < 3; ++stream) {
                std::uint64_t base = ((q * 3 + stream) * 4ull) << 20;
                auto& r = rig.add(sched::Op::read, base + round * 64 * kib, 64 * kib);
                r.queue = queues[q];
                rig.dev->submit(r);
                auto s = *rig.dev->read_ahead_stats();
                peak = std::max(peak, s.bytes_cached + s.bytes_inflight);
            }
        }
        rig.settle();
    }
    auto s = *rig.dev->read_ahead_stats();
    CHECK(peak <= cache);
    CHECK(peak > 0);
    CHECK(s.bytes_cached + s.bytes_inflight <= cache);
    for (auto q : queues) rig.dev->close_queue(q);
}

TEST_CASE("read_ahead_kb auto: 2560 KiB on hdd, 128 KiB on ssd, off on RAM without a profile; 0 turns it off") {
    CHECK(Rig("hdd", std::nullopt).dev->read_ahead_stats()->window_bytes == 2560 * kib);
    CHECK(Rig("ssd", std::nullopt).dev->read_ahead_stats()->window_bytes == 128 * kib);
    // No latency to hide: a window would only add a copy per read (docs/data-path.md).
    CHECK_FALSE(Rig("none", std::nullopt).dev->read_ahead_stats());
    CHECK(Rig("hdd", 1024).dev->read_ahead_stats()->window_bytes == 1024 * kib);
    CHECK_FALSE(Rig("hdd", 0).dev->read_ahead_stats());
}

TEST_CASE("hdd: a hit needs no device time") {
    Rig rig("hdd", std::nullopt);
    rig.write(0, 4ull << 20, 1);
    rig.settle();
    rig.read(0, 128 * kib);
    rig.read(128 * kib, 128 * kib);   // the second read of a stream starts read-ahead
    rig.settle();                     // the window behind it is cached now
    auto before = rig.done;
    rig.read(256 * kib, 128 * kib);
    // Answered inside submit(), before the loop ran at all.
    CHECK(rig.done == before + 1);
    CHECK(Rig::matches(rig.reqs.back(), 1));
    CHECK(rig.dev->read_ahead_stats()->hits == 1);
}
