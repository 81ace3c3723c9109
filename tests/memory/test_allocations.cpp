// Heap allocations per request in steady state: the real server (its own
// thread, as in tests/unit/daemon) on a RAM device with each scheduler,
// behind the QoS layer, with a timing profile, and on a file device on
// io_uring (buffered and O_DIRECT), driven over a unix socket by a client
// that allocates nothing itself;
// malloc and its family are counted (interposed below, forwarding to
// glibc's), so operator new, aligned_alloc and Asio's handlers all count.
// After a warm-up, 4 KiB random reads and writes at 1 and 64 in flight
// must allocate nothing (at most one in 100 requests: cfq's idle timer).
#include <doctest/doctest.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "../unit/daemon/server_fixture.hpp"
#include "nbd/wire.hpp"
#include "raw_client.hpp"

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
void __libc_free(void*);
}

namespace {
std::atomic<std::uint64_t> allocations{0};
void count() { allocations.fetch_add(1, std::memory_order_relaxed); }
}   // namespace

extern "C" {
void* malloc(std::size_t n) {
    count();
    return __libc_malloc(n);
}
void* calloc(std::size_t n, std::size_t size) {
    count();
    return __libc_calloc(n, size);
}
void* realloc(void* p, std::size_t n) {
    count();
    return __libc_realloc(p, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
    count();
    return __libc_memalign(align, n);
}
void* memalign(std::size_t align, std::size_t n) {
    count();
    return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
    count();
    void* p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
void free(void* p) {
    __libc_free(p);
}
}

using namespace nbdsched;
using namespace nbdsched::testing;
using namespace nbdsched::testlib;

namespace {

constexpr std::uint32_t bs = 4096;
constexpr std::uint64_t region = 4u << 20;   // written once first: no page is allocated later

// Keeps `depth` 4 KiB requests in flight, reads and writes at random
// offsets, until `total` have been answered. Preallocated buffers only.
class Load {
public:
    explicit Load(RawClient& c) : c_(c) {}

    bool run(unsigned depth, unsigned total) {
        unsigned sent = 0, done = 0;
        while (sent < depth && sent < total) send(sent++);
        while (done < total) {
            if (!c_.read_exact(header_.data(), header_.size())) return false;
            if (nbd::load_u32(header_.data()) != nbd::simple_reply_magic || nbd::load_u32(header_.data() + 4) != 0)
                return false;
            const bool read = (nbd::load_u64(header_.data() + 8) & 1) != 0;
            if (read && !c_.read_exact(data_.data(), bs)) return false;
            ++done;
            if (sent < total) send(sent++);
        }
        return true;
    }

    // Every block of the region once.
    bool fill() {
        for (std::uint64_t off = 0; off < region; off += bs) {
            put(false, off, off);
            if (!c_.read_exact(header_.data(), header_.size())) return false;
        }
        return true;
    }

private:
    void send(unsigned i) {
        rng_ ^= rng_ << 13;
        rng_ ^= rng_ >> 7;
        rng_ ^= rng_ << 17;
        const bool read = (i & 1) != 0;
        put(read, (rng_ % (region / bs)) * bs, (std::uint64_t(i) << 1) | (read ? 1 : 0));
    }
    void put(bool read, std::uint64_t offset, std::uint64_t cookie) {
        std::uint8_t* p = out_.data();
        nbd::store_u32(p, nbd::request_magic);
        nbd::store_u16(p + 4, 0);
        nbd::store_u16(p + 6, read ? READ : WRITE);
        nbd::store_u64(p + 8, cookie);
        nbd::store_u64(p + 16, offset);
        nbd::store_u32(p + 24, bs);
        c_.send_raw(out_.data(), read ? nbd::request_size : nbd::request_size + bs);
    }

    RawClient& c_;
    std::uint64_t rng_ = 88172645463325252ull;
    std::array<std::uint8_t, nbd::request_size + bs> out_{};
    std::array<std::uint8_t, nbd::simple_reply_size> header_{};
    std::array<std::uint8_t, bs> data_{};
};

// Allocations per request over `total` requests after `warm` of them.
double per_request(Load& load, unsigned depth, unsigned warm, unsigned total) {
    REQUIRE(load.run(depth, warm));
    const auto before = allocations.load();
    REQUIRE(load.run(depth, total));
    return double(allocations.load() - before) / total;
}

// Serves `config` and checks 4 KiB reads and writes at queue depth 1 and 64
// allocate at most once in 100 requests after a warm-up.
void check_steady_state(const config::Config& config, const std::string& label) {
    TestServer server(config);
    RawClient c(server.socket());
    REQUIRE(c.handshake("default", false));
    Load load(c);
    REQUIRE(load.fill());
    for (unsigned depth : {1u, 64u}) {
        CAPTURE(depth);
        const double per = per_request(load, depth, 2000, 10000);
        std::printf("%s qd%u: %.4f allocations per request\n", label.c_str(), depth, per);
        CHECK(per <= 0.01);
    }
}

}   // namespace

TEST_CASE("4 KiB reads and writes on a RAM device allocate (almost) nothing in steady state") {
    // Not quite 0 with cfq: when its idle timer must fire earlier than armed
    // while the cancelled wait is still queued, the new wait's Asio operation
    // is allocated (the device's timer keeps one in a slot of its own).
    for (const char* sched : {"none", "cfq", "bfq"}) {
        CAPTURE(sched);
        auto config = standard_config();
        config.devices[0].scheduler = sched;
        check_steady_state(config, sched);
    }
}

// A group with a reserve, a limit and a latency target: every request is
// tracked by the QoS layer, waits at its gate and is dispatched by the floor
// or the policy. The limit (10,000 a second) is below what this client asks
// for at either depth, so requests wait for the device's wake-up timer.
TEST_CASE("4 KiB reads and writes through the QoS layer allocate (almost) nothing in steady state") {
    for (const char* sched : {"none", "bfq"}) {
        CAPTURE(sched);
        auto config = standard_config();
        config.devices[0].scheduler = sched;
        auto& qos = config.groups[0].qos;
        qos.reserve.iops = 1000;
        qos.limit.iops = 10000;
        qos.latency_target = std::chrono::seconds(10);
        check_steady_state(config, std::string("qos ") + sched);
    }
}

// A RAM device with a timing profile: every request waits for its emulated
// completion on the device's release timer. Read-ahead (on by default with
// a profile) is off: it allocates per prefetch.
TEST_CASE("4 KiB reads and writes on a device with a timing profile allocate (almost) nothing in steady state") {
    auto config = standard_config();
    config.devices[0].profile = "nvme";
    config.devices[0].scheduler = "bfq";
    config.devices[0].read_ahead_kb = 0;
    check_steady_state(config, "nvme profile bfq");
}

// A file device on `engine`, buffered and O_DIRECT; read-ahead, off here,
// allocates per prefetch.
static void check_file_steady_state(backend::IoEngine engine, const std::string& label) {
    for (bool direct : {false, true}) {
        CAPTURE(direct);
        testlib::TempDir dir;
        auto config = standard_config();
        config.devices[0].backend = config::BackendKind::file;
        config.devices[0].path = dir.file("f.img");
        config.devices[0].size = region;
        config.devices[0].direct = direct;
        config.devices[0].io_engine = engine;
        config.devices[0].read_ahead_kb = 0;
        check_steady_state(config, direct ? label + " direct" : label);
    }
}

// io_uring, the file engine's default: the ring is driven from the loop
// (LoopDriver's eventfd read and posted submit, the connection's posted
// reply flush each keep their operation in a slot of their own).
TEST_CASE("4 KiB reads and writes on a file device (io_uring) allocate (almost) nothing in steady state") {
    check_file_steady_state(backend::IoEngine::io_uring, "file io_uring");
}

// The thread pool: a request's post to the pool keeps its operation in the
// request's slot, the completions' post back to the loop in one of its
// own (they allocated 1-2 times per request).
TEST_CASE("4 KiB reads and writes on a file device (threads) allocate (almost) nothing in steady state") {
    check_file_steady_state(backend::IoEngine::threads, "file threads");
}
