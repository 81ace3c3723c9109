// SeekHistory, and the rule built on it: a queue that has only begun and
// seeks with every request counts as seeky for contended_seeky_depth at once,
// in cfq and bfq, not after the 5 (cfq) or 20 (bfq) requests the kernel's
// test needs. bench/exp10 saw why: a flooder held back by the request pool
// sent its first 20 requests per queue over 1.6 s, and was served as
// sequential (whole budgets, a full device queue) all that time.
#include <doctest/doctest.h>

#include <map>

#include "sched/bfq/bfq.hpp"
#include "sched/cfq/cfq.hpp"
#include "sched/seek_history.hpp"

using namespace nbdsched::sched;

TEST_CASE("seek history: the kernel's test, and seeky so far while young") {
    SeekHistory random, sequential, mixed;
    random.add(false);   // a queue's first request has nothing to measure from
    sequential.add(false);
    CHECK_FALSE(random.seeky_so_far(19));   // one request tells nothing yet
    for (int i = 2; i <= 20; ++i) {
        random.add(true);
        sequential.add(false);
        CHECK(random.seeky_so_far(19));
        CHECK_FALSE(random.seeky(19));   // 19 of 32 is not more than 19
        CHECK_FALSE(sequential.seeky_so_far(19));
    }
    random.add(true);
    CHECK(random.seeky(19));   // the 21st request: 20 sought
    // One request that did not seek after the first: no longer presumed.
    mixed.add(false);
    mixed.add(true);
    mixed.add(false);
    mixed.add(true);
    CHECK_FALSE(mixed.seeky_so_far(4));
    // cfq's threshold: 4 of 32.
    SeekHistory c;
    for (int i = 0; i < 5; ++i) c.add(true);
    CHECK(c.seeky(4));
}

namespace {

// A new random reader (group 1, 16 requests far apart) and one request of
// another group; no completions. The most requests of group 1 at the device.
unsigned most_in_flight_of_new_flooder(Scheduler& s) {
    using namespace std::chrono_literals;
    Time now{};
    s.set_group(1, 100);
    s.set_group(2, 100);
    s.open_queue(1, 1, now);
    s.open_queue(2, 2, now);
    RequestId id = 1;
    for (int i = 0; i < 16; ++i) {
        Request r{id++, 1, 1, Op::read, std::uint64_t(i % 2 ? 900 - i : i) << 30, 4096, true, false, now};
        s.submit(r, now);
    }
    s.submit(Request{id++, 2, 2, Op::read, 2000ull << 30, 4096, true, false, now}, now);
    unsigned at_device = 0, most = 0;
    for (int step = 0; step < 64; ++step) {
        auto r = s.dispatch(now);
        if (r && r->group == 1) most = std::max(most, ++at_device);
        now += 1ms;   // no completion: whatever a queue may dispatch, it does
    }
    return most;
}

}   // namespace

TEST_CASE("contended seeky: a new flooder is served one request at a time at once") {
    std::string err;
    for (std::string depth : {"1", "0"}) {
        CAPTURE(depth);
        auto bfq = make_bfq(DeviceTraits{true, 32}, Tunables{{"contended_seeky_depth", depth}}, err);
        auto cfq = make_cfq(DeviceTraits{true, 32}, Tunables{{"contended_seeky_depth", depth}}, err);
        REQUIRE(bfq);
        REQUIRE(cfq);
        unsigned b = most_in_flight_of_new_flooder(*bfq), c = most_in_flight_of_new_flooder(*cfq);
        MESSAGE("contended_seeky_depth " << depth << ": bfq " << b << ", cfq " << c << " at the device");
        if (depth == "1") {
            CHECK(b == 1);
            CHECK(c == 1);
        } else {   // the kernel's rule: the young queue is not seeky yet
            CHECK(b > 1);
            CHECK(c > 1);
        }
    }
}
