// EventLoops: other loops run their own handlers, and exclusive() holds
// every one of them at a handler boundary while loop 0 works (under TSan in
// the tsan suite: the plain counters below are its race check).
#include <doctest/doctest.h>
#include <boost/asio/post.hpp>
#include <chrono>
#include <functional>
#include <thread>

#include "daemon/process/event_loops.hpp"

using namespace nbdsched::daemon;

namespace {

// Re-posts itself on `io`, counting, until `stop`.
void spin(boost::asio::io_context& io, std::uint64_t& count, const bool& stop) {
    boost::asio::post(io, [&io, &count, &stop] {
        ++count;
        if (!stop) spin(io, count, stop);
    });
}

}   // namespace

TEST_CASE("exclusive() runs while every other loop waits") {
    boost::asio::io_context main(1);
    EventLoops loops(main, 3);
    REQUIRE(loops.size() == 3);
    std::uint64_t counts[2] = {0, 0};   // plain: each loop's own, read by main only inside exclusive()
    bool stop = false;
    for (int i = 0; i < 2; ++i) spin(loops.at(i + 1), counts[i], stop);
    loops.start(nbdsched::config::BusyPoll{});
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (int round = 0; round < 20; ++round) {
        std::uint64_t before[2] = {};
        loops.exclusive([&] {
            before[0] = counts[0];
            before[1] = counts[1];
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
            CHECK(counts[0] == before[0]);   // nothing ran on the other loops meanwhile
            CHECK(counts[1] == before[1]);
            loops.exclusive([] {});   // nested: runs directly, no deadlock
        });
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    std::uint64_t seen[2] = {};
    loops.exclusive([&] {
        seen[0] = counts[0];
        seen[1] = counts[1];
        stop = true;
    });
    CHECK(seen[0] > 0);   // the loops did run between the pauses
    CHECK(seen[1] > 0);
    loops.stop();
}

TEST_CASE("event_loop_count: never more loops than devices, one with TLS") {
    CHECK(event_loop_count(4, 2, false) == 2);
    CHECK(event_loop_count(2, 5, false) == 2);
    CHECK(event_loop_count(1, 5, false) == 1);
    CHECK(event_loop_count(4, 0, false) == 1);
    CHECK(event_loop_count(4, 3, true) == 1);
    CHECK(event_loop_count(0, 1024, false) == std::max(1u, std::thread::hardware_concurrency()));
}
