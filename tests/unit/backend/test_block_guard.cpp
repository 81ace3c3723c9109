// BlockGuard (backend/block_guard.hpp): an O_DIRECT read-modify-write holds
// its blocks exclusively against every other mutation of them.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <thread>

#include "backend/block_guard.hpp"

using nbdsched::backend::BlockGuard;

namespace {

// Takes a hold on a thread of its own (and lets it go at once); got() once
// the take returned. Whether it waits is only looked at after a pause, so a
// slow machine can hide a missing wait but never fail a correct guard.
class Taker {
public:
    explicit Taker(std::function<BlockGuard::Hold()> take)
        : thread_([this, take = std::move(take)] {
              auto h = take();
              got_ = true;
          }) {}
    ~Taker() { join(); }
    bool got_after_a_while() const {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        return got_.load();
    }
    bool got_when_joined() {
        join();
        return got_.load();
    }

private:
    void join() {
        if (thread_.joinable()) thread_.join();
    }
    std::atomic<bool> got_{false};
    std::thread thread_;
};

}   // namespace

TEST_CASE("block guard: a read-modify-write waits for a write that took the lock-free path") {
    BlockGuard guard;
    auto write = guard.shared(0, 4096);                        // nothing exclusive yet: only counted
    Taker rmw([&] { return guard.exclusive(8192, 12288); });   // another block: the count alone holds it back
    CHECK_FALSE(rmw.got_after_a_while());
    write.release();
    CHECK(rmw.got_when_joined());
}

TEST_CASE("block guard: while a read-modify-write holds a block, a write of it waits and the waker says when") {
    BlockGuard guard;
    int wakes = 0;
    guard.set_waker([&] { ++wakes; });
    auto rmw = guard.exclusive(4096, 8192);
    CHECK_FALSE(guard.try_shared(8000, 8200).has_value());   // one byte of the block is enough
    CHECK(guard.try_shared(8192, 12288).has_value());        // the next block is free
    CHECK(wakes == 0);
    Taker writer([&] { return guard.shared(0, 1 << 20); });
    CHECK_FALSE(writer.got_after_a_while());
    rmw.release();
    CHECK(writer.got_when_joined());
    CHECK(wakes == 1);   // once, for the failed try_shared
    CHECK(guard.try_shared(8000, 8200).has_value());
}

TEST_CASE("block guard: a waiting read-modify-write keeps later writes of its block out") {
    BlockGuard guard;
    auto first = guard.shared(0, 4096);
    Taker rmw([&] { return guard.exclusive(0, 4096); });
    while (guard.try_shared(0, 4096).has_value())   // until the read-modify-write is waiting
        std::this_thread::yield();
    CHECK(guard.try_shared(4096, 8192).has_value());   // other blocks go on
    CHECK_FALSE(rmw.got_after_a_while());
    first.release();
    CHECK(rmw.got_when_joined());
}

TEST_CASE("block guard: read-modify-writes of one block take turns; of different blocks, run together") {
    BlockGuard guard;
    auto a = guard.exclusive(0, 4096);
    auto b = guard.exclusive(4096, 8192);   // does not wait: would hang here otherwise
    Taker both([&] { return guard.exclusive(0, 8192); });
    CHECK_FALSE(both.got_after_a_while());
    a.release();
    CHECK_FALSE(both.got_after_a_while());   // b still holds half of it
    b.release();
    CHECK(both.got_when_joined());
}
