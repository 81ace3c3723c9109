// BFQ under a deterministic storm of events: submits, completions out of
// order, queues closing and reopening, re-weighting and tunable changes at
// run time. Nothing may be lost, duplicated, or dispatched past the depth.
#include <doctest/doctest.h>

#include <map>
#include <set>
#include <vector>

#include "sched/bfq/bfq.hpp"
#include "test_lcg.hpp"

using namespace nbdsched::sched;
using namespace std::chrono_literals;
using nbdsched::Nanos;

namespace {

using test::Lcg;

const char* const kKnobs[][2] = {
    {"slice_idle", "0"},
    {"slice_idle", "8ms"},
    {"slice_idle", "auto"},
    {"group_idle", "0"},
    {"group_idle", "2ms"},
    {"strict_guarantees", "1"},
    {"strict_guarantees", "0"},
    {"max_budget", "64"},
    {"max_budget", "0"},
    {"timeout_sync", "10ms"},
    {"timeout_sync", "125ms"},
    {"fifo_expire_sync", "5ms"},
    {"back_seek_max", "0"},
    {"back_seek_penalty", "1"},
    {"low_latency", "0"},
};

void storm(bool rotational, unsigned depth, std::uint64_t seed) {
    std::string err;
    auto s = make_bfq(DeviceTraits{rotational, depth}, {}, err);
    REQUIRE(s);
    Lcg rng{seed};
    Time now{};
    RequestId next_id = 1;
    std::map<RequestId, Time> waiting;   // submitted, not dispatched
    std::vector<RequestId> at_device;
    std::set<RequestId> dispatched;
    std::set<QueueId> closed;
    std::uint64_t completed = 0;

    auto drain = [&] {
        while (auto r = s->dispatch(now)) {
            REQUIRE(waiting.erase(r->id) == 1);
            REQUIRE(dispatched.insert(r->id).second);
            at_device.push_back(r->id);
            REQUIRE(s->in_flight() <= depth);
        }
    };
    auto advance = [&](Nanos by) {
        Time target = now + by;
        while (auto w = s->next_wakeup()) {
            if (*w > target) break;
            now = std::max(now, *w);
            drain();
            if (s->next_wakeup() == w) break;   // not re-armed at the same time
        }
        now = target;
    };

    for (int step = 0; step < 20000; ++step) {
        switch (rng.next(10)) {
        case 0:
        case 1:
        case 2:
        case 3: {
            QueueId q = 1 + rng.next(12);
            if (closed.erase(q)) s->open_queue(q, GroupId(q % 4), now);
            Request r{.id = next_id++, .queue = q, .group = GroupId(q % 4), .op = rng.next(3) ? Op::read : Op::write, .offset = std::uint64_t(rng.next(1u << 20)) * 4096 + (q << 40), .length = 4096u << rng.next(4), .sync = rng.next(4) != 0};
            s->submit(r, now);
            waiting[r.id] = now;
            break;
        }
        case 4:
        case 5:
        case 6:
            if (!at_device.empty()) {
                std::size_t i = rng.next(unsigned(at_device.size()));
                s->complete(at_device[i], now);
                at_device.erase(at_device.begin() + std::ptrdiff_t(i));
                ++completed;
            }
            break;
        case 7: advance(Nanos(rng.next(3000) * 1000)); break;
        case 8: {
            unsigned k = rng.next(std::size(kKnobs) + 3);
            if (k < std::size(kKnobs)) CHECK(s->set_tunable(kKnobs[k][0], kKnobs[k][1], now).empty());
            else if (k == std::size(kKnobs)) {
                const unsigned weight = 1 + rng.next(1000);   // before the group: arguments are unsequenced
                s->set_group(GroupId(rng.next(4)), weight);
            } else {
                QueueId q = 1 + rng.next(12);
                s->close_queue(q, now);
                closed.insert(q);
            }
            break;
        }
        default: break;
        }
        drain();
        REQUIRE(s->queued() == waiting.size());
        REQUIRE(s->in_flight() == at_device.size());
    }
    // Wind down: complete everything, follow the timers, until empty.
    for (int round = 0; round < 100000 && (s->queued() || s->in_flight()); ++round) {
        drain();
        for (RequestId id : at_device) {
            s->complete(id, now);
            ++completed;
        }
        at_device.clear();
        drain();
        advance(1ms);
    }
    CHECK(s->queued() == 0);
    CHECK(s->in_flight() == 0);
    CHECK(waiting.empty());
    CHECK(completed == next_id - 1);
    CHECK(s->stats(now).device.completed == completed);
    // Every fifo_expire + budget timeout bound is far below the storm's span.
    CHECK(now < Time{600s});
}

}   // namespace

TEST_CASE("bfq storm: ssd depth 8") { storm(false, 8, 1); }
TEST_CASE("bfq storm: ssd depth 32") { storm(false, 32, 2); }
TEST_CASE("bfq storm: hdd depth 1") { storm(true, 1, 3); }
TEST_CASE("bfq storm: hdd depth 4") { storm(true, 4, 4); }
