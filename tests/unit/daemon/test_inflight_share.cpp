// daemon/inflight_budget: the pool shared by weight across groups (the
// analogue of BFQ's per-cgroup request limit); clock injected, so exact.
#include <doctest/doctest.h>

#include <chrono>
#include <memory>
#include <vector>

#include "daemon/device/inflight_budget.hpp"
#include "recording_waiter.hpp"

using nbdsched::Nanos;
using nbdsched::daemon::InflightBudget;
using namespace std::chrono_literals;

namespace {

constexpr nbdsched::sched::GroupId A = 1;   // the flooder
constexpr nbdsched::sched::GroupId B = 2;

using Waiter = nbdsched::testlib::RecordingWaiter;

struct Pool {
    Nanos clock{1s};
    std::vector<int> log;
    InflightBudget budget;

    explicit Pool(std::uint64_t slots, bool fair = true)
        : budget(options(slots, fair)) {}

    InflightBudget::Options options(std::uint64_t slots, bool fair) {
        InflightBudget::Options o;
        o.max_requests = slots;
        o.fair_share = fair;
        o.share_idle = 8ms;
        o.clock = [this] { return clock; };
        return o;
    }

    std::shared_ptr<Waiter> join(nbdsched::sched::GroupId g, int id) {
        auto w = std::make_shared<Waiter>(log, id);
        budget.wait(g, w);
        return w;
    }
    // The woken waiter's connection runs and takes its request.
    void use_ticket(nbdsched::sched::GroupId g) { budget.take_request(g, true); }
};

}   // namespace

TEST_CASE("inflight share: a lone group may fill the whole pool") {
    Pool p(8);
    p.budget.set_weight(A, 100);
    p.budget.set_weight(B, 100);
    CHECK(p.budget.share(A) == 8);
    for (int i = 0; i < 8; ++i) {
        REQUIRE(p.budget.admits(A, false));
        p.budget.take_request(A, false);
    }
    CHECK_FALSE(p.budget.admits(A, false));   // the pool is full, not the share
    CHECK(p.budget.held(A) == 8);
}

TEST_CASE("inflight share: a group under its share is admitted while another holds the whole pool") {
    Pool p(8);
    p.budget.set_weight(A, 300);
    p.budget.set_weight(B, 100);
    for (int i = 0; i < 8; ++i) p.budget.take_request(A, false);   // alone: the whole pool
    auto a1 = p.join(A, 1);                                        // A's connections queued first
    auto a2 = p.join(A, 2);
    CHECK(p.log.empty());
    // B comes: A's 8 slots may never come back (stalled clients), so B does
    // not wait for them; A, over its share now, gets nothing more.
    auto b1 = p.join(B, 11);
    CHECK(p.budget.share(A) == 6);   // 8 * 300 / 400
    CHECK(p.budget.share(B) == 2);   // 8 * 100 / 400
    CHECK(p.log == std::vector<int>{11});
    p.use_ticket(B);
    CHECK(p.budget.admits(B, false));   // under its share, nobody eligible ahead
    p.budget.take_request(B, false);
    CHECK_FALSE(p.budget.admits(B, false));   // at its share
    auto b3 = p.join(B, 13);
    CHECK(p.budget.stats().requests == 10);   // the pool's total passes its limit by A's excess...
    p.budget.give(A, 0);
    p.budget.give(A, 0);
    CHECK(p.log == std::vector<int>{11});   // ...which A gives back before it gets more
    p.budget.give(A, 0);                    // A below its share: its own line, in order
    CHECK(p.log == std::vector<int>{11, 1});
    p.use_ticket(A);
    // Each at its share: freed room stays with the group that freed it.
    p.budget.give(B, 0);
    CHECK(p.log == std::vector<int>{11, 1, 13});
    p.use_ticket(B);
    p.budget.give(A, 0);
    CHECK(p.log == std::vector<int>{11, 1, 13, 2});
    p.use_ticket(A);
    CHECK(p.budget.held(A) == 6);
    CHECK(p.budget.held(B) == 2);
    CHECK(p.budget.stats().requests == 8);
}

TEST_CASE("inflight share: bytes are shared by weight; a group holding none is admitted whatever its size") {
    InflightBudget::Options o;
    o.max_bytes = 1000;
    Nanos clock{1s};
    o.clock = [&clock] { return clock; };
    InflightBudget b(o);
    std::vector<int> log;
    b.set_weight(A, 100);
    b.set_weight(B, 900);
    // A alone fills the bytes (a client that never reads its replies, or
    // that stalls in the middle of a WRITE payload, may hold them for good).
    for (int i = 0; i < 4; ++i) {
        REQUIRE(b.admits(A, false));
        b.take_request(A, false);
        b.take_bytes(A, 300);
    }
    CHECK_FALSE(b.admits(A, false));
    CHECK(b.held_bytes(A) == 1200);
    // B is admitted up to its share of the bytes, 900 of 1000, though the device holds 1200.
    CHECK(b.byte_share(B) == 900);
    REQUIRE(b.admits(B, false));
    b.take_request(B, false);
    b.take_bytes(B, 800);
    CHECK(b.byte_share(A) == 100);   // B uses the device now
    REQUIRE(b.admits(B, false));     // 800 < 900: one more, of any size
    b.take_request(B, false);
    b.take_bytes(B, 400);
    CHECK_FALSE(b.admits(B, false));
    auto w = std::make_shared<Waiter>(log, 1);
    b.wait(B, w);
    CHECK(log.empty());
    b.give(A, 300);   // A over its share: B's own replies serve B
    CHECK(log.empty());
    b.give(B, 400);
    CHECK(log == std::vector<int>{1});
    // A weight too small for one byte still gets one request once it holds none.
    InflightBudget::Options q = o;
    q.max_bytes = 10;
    InflightBudget c(q);
    c.set_weight(A, 1);
    c.set_weight(B, 1000);
    c.take_request(B, false);
    c.take_bytes(B, 10);
    CHECK(c.byte_share(A) == 1);
    CHECK(c.admits(A, false));
}

TEST_CASE("inflight share: a connection of a group under its share passes the line of a group over it") {
    Pool p(8);
    p.budget.take_request(B, false);   // B uses the device: A's share is 4
    for (int i = 0; i < 4; ++i) p.budget.take_request(A, false);
    CHECK_FALSE(p.budget.admits(A, false));   // 3 slots free, but A is at its share
    auto a1 = p.join(A, 1);
    CHECK(p.log.empty());
    CHECK(p.budget.admits(B, false));   // B is not behind A's waiter
    p.budget.take_request(B, false);
    // Without the share a newcomer of A would have taken the free room.
    CHECK(p.budget.held(A) == 4);
}

TEST_CASE("inflight share: a group keeps its share for share_idle after its last slot; then a lone group gets all") {
    Pool p(8);
    p.budget.take_request(B, false);
    p.budget.give(B, 0);   // B's qd1 reader between a reply and its next request
    CHECK(p.budget.share(A) == 4);
    for (int i = 0; i < 4; ++i) p.budget.take_request(A, false);
    CHECK_FALSE(p.budget.admits(A, false));
    auto a1 = p.join(A, 1);
    CHECK(p.budget.admits(B, false));   // B's next request finds its room
    p.clock += 9ms;                     // B went away
    CHECK(p.budget.share(A) == 8);
    p.budget.give(A, 0);   // A's next reply serves its line with the whole pool
    CHECK(p.log == std::vector<int>{1});
    p.use_ticket(A);
    CHECK(p.budget.admits(A, false));
}

TEST_CASE("inflight share: a returned ticket passes on within its group, in order") {
    Pool p(4);
    for (int i = 0; i < 2; ++i) p.budget.take_request(A, false);
    for (int i = 0; i < 2; ++i) p.budget.take_request(B, false);
    auto b1 = p.join(B, 11);
    auto a1 = p.join(A, 1);
    auto b2 = p.join(B, 12);
    p.budget.give(B, 0);
    CHECK(p.log == std::vector<int>{11});
    p.budget.return_ticket(B);   // 11 closed before using its turn: B's next
    CHECK(p.log == std::vector<int>{11, 12});
    p.use_ticket(B);
    CHECK(p.budget.held(B) == 2);
    p.budget.give(A, 0);
    CHECK(p.log == std::vector<int>{11, 12, 1});
}

TEST_CASE("inflight share: shares round down and never reach zero") {
    Pool p(10);
    for (nbdsched::sched::GroupId g = 1; g <= 4; ++g) p.budget.take_request(g, false);
    for (nbdsched::sched::GroupId g = 1; g <= 4; ++g) CHECK(p.budget.share(g) == 2);   // 10/4, sum 8 <= 10
    Pool q(2);
    q.budget.set_weight(A, 1000);
    q.budget.set_weight(B, 1);
    q.budget.take_request(A, false);
    CHECK(q.budget.share(B) == 1);
    CHECK(q.budget.admits(B, false));
}

TEST_CASE("inflight share: fair_share off is one first-come-first-served line, as before") {
    Pool p(4, false);
    p.budget.take_request(B, false);
    for (int i = 0; i < 3; ++i) p.budget.take_request(A, false);
    auto a1 = p.join(A, 1);
    auto b1 = p.join(B, 11);
    CHECK(p.budget.share(A) == 4);
    p.budget.give(A, 0);
    CHECK(p.log == std::vector<int>{1});
    CHECK_FALSE(p.budget.admits(B, false));   // behind the line whatever its group
    p.use_ticket(A);
    p.budget.give(B, 0);
    CHECK(p.log == std::vector<int>{1, 11});
}
