// The bounded waits on storage (daemon/process/storage_waits.hpp) on real
// devices: RAM backends, some behind the fault wrapper that delays or fails
// their flush. A flush that blocks past the bound is named as unfinished
// and the wait returns at its deadline, not when the flush ends; a pool job
// that does not end makes join_within give up the same way. Bounds are
// ratios of the injected delay, never tight times.
#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <cerrno>
#include <chrono>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"
#include "common/fault_rule.hpp"
#include "daemon/process/storage_waits.hpp"
#include "sched/scheduler.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

// A RAM device; with `flush_rule`, behind the fault wrapper with that rule.
std::unique_ptr<Device> ram_device(boost::asio::io_context& io, const std::string& name,
                                   std::optional<FaultRule> flush_rule = std::nullopt) {
    std::string error;
    Device::Parts parts;
    parts.name = name;
    parts.backend = std::make_unique<backend::RamBackend>(1 << 20);
    if (flush_rule) parts.backend = std::make_unique<backend::FaultyBackend>(std::move(parts.backend),
                                                                             std::vector<FaultRule>{*flush_rule});
    parts.scheduler = sched::make_scheduler("none", {}, {}, error);
    REQUIRE(parts.scheduler);
    return std::make_unique<Device>(io, nullptr, std::move(parts));
}

FaultRule flush_delay(std::chrono::milliseconds delay) {
    FaultRule rule;
    rule.ops = fault_flush;
    rule.delay = delay;
    return rule;
}

FaultRule flush_error(int error) {
    FaultRule rule;
    rule.ops = fault_flush;
    rule.error = error;
    return rule;
}

}   // namespace

TEST_CASE("FlushThreads: flushes that finish in time are all reported, and `then` runs once") {
    boost::asio::io_context io;
    std::vector<std::unique_ptr<Device>> devices;
    for (const char* name : {"a", "b", "c"}) devices.push_back(ram_device(io, name));
    devices.push_back(ram_device(io, "slowish", flush_delay(50ms)));   // well within the bound
    FlushThreads flushes;
    std::atomic<int> then_calls = 0;
    auto round = flushes.start(devices, [&] { ++then_calls; });
    auto out = flushes.wait(round, 30s);
    CHECK(out.unfinished.empty());
    CHECK(out.failed.empty());
    CHECK(then_calls == 1);
    CHECK(flushes.running().empty());
    CHECK(flushes.outcome(round).unfinished.empty());
}

TEST_CASE("FlushThreads: a failed flush is reported with its device and errno") {
    boost::asio::io_context io;
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(ram_device(io, "good"));
    devices.push_back(ram_device(io, "broken", flush_error(EIO)));
    FlushThreads flushes;
    auto out = flushes.wait(flushes.start(devices), 30s);
    CHECK(out.unfinished.empty());
    REQUIRE(out.failed.size() == 1);
    CHECK(out.failed[0].device == "broken");
    CHECK(out.failed[0].error == EIO);
}

TEST_CASE("FlushThreads: no devices: nothing to wait for, `then` at once") {
    FlushThreads flushes;
    bool called = false;
    auto round = flushes.start({}, [&] { called = true; });
    CHECK(called);
    auto out = flushes.wait(round, 30s);
    CHECK(out.unfinished.empty());
    CHECK(out.failed.empty());
}

TEST_CASE("FlushThreads: a flush blocked past the bound is named, the wait returns at the bound") {
    constexpr auto delay = 3000ms;   // the stuck flush
    constexpr auto bound = 300ms;    // the wait's deadline: a tenth of it
    boost::asio::io_context io;
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(ram_device(io, "fast"));
    devices.push_back(ram_device(io, "stuck", flush_delay(delay)));
    FlushThreads flushes;
    std::atomic<int> then_calls = 0;
    const auto began = Clock::now();
    auto round = flushes.start(devices, [&] { ++then_calls; });
    auto out = flushes.wait(round, bound);
    const auto took = Clock::now() - began;
    CHECK(out.unfinished == std::vector<std::string>{"stuck"});
    CHECK(out.failed.empty());
    CHECK(took >= bound);
    CHECK(took < delay / 2);   // gave up at its deadline, not when the flush ended
    CHECK(then_calls == 0);
    CHECK(flushes.running() == std::vector<std::string>{"stuck"});
    CHECK(flushes.outcome(round).unfinished == std::vector<std::string>{"stuck"});

    // A second round while it still runs: the fast device answers, the stuck one is named again.
    auto again = flushes.wait(flushes.start(devices), bound);
    CHECK(again.unfinished == std::vector<std::string>{"stuck"});
    auto busy = flushes.running();
    CHECK(busy == std::vector<std::string>{"stuck"});   // one name, two flushes running on it

    // It ends later: the round is complete, `then` ran once (the devices
    // outlive the flushes, as the daemon's do unless it exits with _Exit).
    auto late = flushes.wait(round, 60s);
    CHECK(late.unfinished.empty());
    CHECK(then_calls == 1);
    for (int i = 0; i < 600 && !flushes.running().empty(); ++i) std::this_thread::sleep_for(100ms);
    CHECK(flushes.running().empty());
}

TEST_CASE("FlushThreads::start_each: a job of its own per device, its errno reported, its device busy meanwhile") {
    boost::asio::io_context io;
    std::vector<std::unique_ptr<Device>> devices;
    for (const char* name : {"a", "b"}) devices.push_back(ram_device(io, name));
    FlushThreads flushes;
    std::promise<void> release;
    auto released = release.get_future().share();
    std::atomic<int> then_calls = 0;
    auto round = flushes.start_each(
        devices,
        [released](Device& d) {
            if (d.name() == "b") released.wait();   // b's job waits like a lock release on a lost cluster
            return d.name() == "b" ? EROFS : 0;
        },
        [&] { ++then_calls; });
    auto out = flushes.wait(round, 200ms);
    CHECK(out.unfinished == std::vector<std::string>{"b"});
    CHECK(flushes.running() == std::vector<std::string>{"b"});
    CHECK(then_calls == 0);
    release.set_value();
    out = flushes.wait(round, 60s);
    CHECK(out.unfinished.empty());
    REQUIRE(out.failed.size() == 1);
    CHECK(out.failed[0].device == "b");
    CHECK(out.failed[0].error == EROFS);
    CHECK(then_calls == 1);
    for (int i = 0; i < 600 && !flushes.running().empty(); ++i) std::this_thread::sleep_for(100ms);
    CHECK(flushes.running().empty());
}

TEST_CASE("join_within: a pool whose job finishes is joined") {
    boost::asio::thread_pool pool(2);
    std::atomic<int> done = 0;
    for (int i = 0; i < 4; ++i) boost::asio::post(pool, [&] {
        std::this_thread::sleep_for(20ms);
        ++done;
    });
    CHECK(join_within(pool, 30s));
    CHECK(done == 4);
}

TEST_CASE("join_within: a pool whose job does not finish is given up at the bound") {
    constexpr auto bound = 300ms;
    // Never joined nor destroyed once join_within gave up on it (its
    // contract); reachable from here, so no leak is reported either.
    static auto* pool = new boost::asio::thread_pool(1);
    std::promise<void> release;
    auto released = release.get_future().share();
    std::atomic<bool> started = false;
    boost::asio::post(*pool, [&started, released] {
        started = true;
        released.wait();
    });
    for (int i = 0; i < 300 && !started; ++i) std::this_thread::sleep_for(10ms);
    REQUIRE(started);
    const auto began = Clock::now();
    CHECK_FALSE(join_within(*pool, bound));
    const auto took = Clock::now() - began;
    CHECK(took >= bound);
    CHECK(took < 10 * bound);
    release.set_value();   // the job ends; the thread join_within left behind joins the pool
}

TEST_CASE("run_within: a job that finishes in time has run") {
    std::atomic<bool> ran = false;
    CHECK(run_within(
        "a quick job", [&ran] { ran = true; }, 30s));
    CHECK(ran);
}

TEST_CASE("run_within: a job that does not finish is given up at the bound") {
    constexpr auto bound = 300ms;
    // Shared with the thread left behind, which outlives this test case.
    auto release = std::make_shared<std::promise<void>>();
    auto released = release->get_future().share();
    const auto began = Clock::now();
    CHECK_FALSE(run_within(
        "a stuck close", [released] { released.wait(); }, bound));
    const auto took = Clock::now() - began;
    CHECK(took >= bound);
    CHECK(took < 10 * bound);
    release->set_value();
}
