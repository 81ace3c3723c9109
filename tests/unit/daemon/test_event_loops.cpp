// EventLoops: other loops run their own handlers, and exclusive() holds
// every one of them at a handler boundary while loop 0 works (under TSan in
// the tsan suite: the plain counters below are its race check).
#include <doctest/doctest.h>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/post.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <thread>

#include "daemon/process/event_loop.hpp"
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
    nbdsched::config::Limits plain;   // loops that neither poll nor nap
    plain.busy_poll = {};
    plain.coalesce = {};
    loops.start(plain);
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

TEST_CASE("event_loop_count: limits.threads, one with TLS; without spreading connections no more than devices") {
    CHECK(event_loop_count(4, 2, false, false) == 2);
    CHECK(event_loop_count(2, 5, false, false) == 2);
    CHECK(event_loop_count(1, 5, false, false) == 1);
    CHECK(event_loop_count(4, 0, false, false) == 1);
    CHECK(event_loop_count(4, 3, true, false) == 1);
    CHECK(event_loop_count(0, 1024, false, false) == std::max(1u, std::thread::hardware_concurrency()));
    // Spread: a device's second connection may use a loop that has no device.
    CHECK(event_loop_count(4, 1, false, true) == 4);
    CHECK(event_loop_count(4, 0, false, true) == 4);
    CHECK(event_loop_count(4, 1, true, true) == 1);
    CHECK(event_loop_count(0, 1, false, true) == std::max(1u, std::thread::hardware_concurrency()));
}

TEST_CASE("EventLoops::place: the loop with the fewest connections, the device's own on a tie") {
    boost::asio::io_context main(1);
    EventLoops loops(main, 3);
    CHECK(loops.index_of(main) == 0);
    CHECK(loops.index_of(loops.at(2)) == 2);
    CHECK(loops.place(1, true) == 1);   // a device's first connection stays at home
    CHECK(loops.place(1, true) == 0);   // its second goes to an empty loop (the lowest)
    CHECK(loops.place(1, true) == 2);
    CHECK(loops.place(1, true) == 1);   // all even again: home
    loops.left(0);
    CHECK(loops.place(2, true) == 0);    // the emptied loop before the device's own
    loops.left(7);                       // not a loop: ignored
    loops.left(SIZE_MAX);                // a connection that never got a loop
    CHECK(loops.place(0, true) == 0);    // 1, 2, 1: home ties with loop 2
    CHECK(loops.place(0, true) == 2);    // 2, 2, 1: loop 2 has fewest
    CHECK(loops.place(1, false) == 1);   // not movable: home however full, and counted
    CHECK(loops.place(0, true) == 0);    // 2, 3, 2: home ties with loop 2
    CHECK(loops.place(0, true) == 2);    // 3, 3, 2
}

TEST_CASE("run_ready: what is ready, at most the bound, also when work never runs dry") {
    boost::asio::io_context io(1);
    auto work = boost::asio::make_work_guard(io);   // as the daemon's loops: never out of work
    int ran = 0;
    for (int i = 0; i < 3; ++i) boost::asio::post(io, [&ran] { ++ran; });
    CHECK(run_ready(io, 32) == 3);   // fewer ready than the bound: all of them
    CHECK(ran == 3);
    CHECK(run_ready(io, 32) == 0);   // nothing ready: returns at once

    // A handler that re-posts itself keeps work ready for ever: io.poll()
    // would not return; run_ready stops at the bound, and the work goes on
    // at the next call.
    std::uint64_t count = 0;
    bool stop = false;
    spin(io, count, stop);
    CHECK(run_ready(io, 32) == 32);
    CHECK(count == 32);
    CHECK(run_ready(io, 5) == 5);
    CHECK(count == 37);
    stop = true;
    CHECK(run_ready(io, 32) == 1);   // the last one, which does not re-post
}
