// bfq's lone-queue shortcut (sched/bfq/lone.cpp) against bfq without it:
// random event traces run on both in lockstep, and after every event
// everything a driver or the control socket can see must be equal. Unlike
// the decision digests' traces, requests often wait for their dispatch
// while other events happen (the device full, or the driver busy), which
// is when a resumed queue must be put back into the trees the long way.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <vector>

#include "sched/bfq/scheduler.hpp"
#include "sched/scheduler.hpp"
#include "test_lcg.hpp"

using namespace nbdsched::sched;
using namespace std::chrono_literals;
using nbdsched::Nanos;

namespace {

using test::Lcg;

std::unique_ptr<bfq::BfqScheduler> make(const DeviceTraits& device, bool shortcut) {
    std::string err;
    auto s = make_scheduler("bfq", device, {}, err);
    REQUIRE(s);
    auto* b = dynamic_cast<bfq::BfqScheduler*>(s.release());
    REQUIRE(b);
    b->set_lone_shortcut(shortcut);
    return std::unique_ptr<bfq::BfqScheduler>(b);
}

void same_entity(const EntityStats& a, const EntityStats& b) {
    CHECK(a.dispatched == b.dispatched);
    CHECK(a.completed == b.completed);
    CHECK(a.dispatched_sectors == b.dispatched_sectors);
    CHECK(a.slices == b.slices);
    CHECK(a.idle_time == b.idle_time);
    CHECK(a.queued == b.queued);
    CHECK(a.in_flight == b.in_flight);
    CHECK(a.expired == b.expired);
}

void same_view(const bfq::BfqScheduler& a, const bfq::BfqScheduler& b, Time now, unsigned clients) {
    CHECK(a.next_wakeup() == b.next_wakeup());
    CHECK(a.queued() == b.queued());
    CHECK(a.in_flight() == b.in_flight());
    CHECK(a.current_max_budget() == b.current_max_budget());
    const SchedulerStats sa = a.stats(now), sb = b.stats(now);
    same_entity(sa.device, sb.device);
    REQUIRE(sa.groups.size() == sb.groups.size());
    for (const auto& [g, gs] : sa.groups) {
        const GroupStats& other = sb.groups.at(g);
        same_entity(gs, other);
        CHECK(gs.weight == other.weight);
        CHECK(gs.charged_sectors == other.charged_sectors);
    }
    REQUIRE(sa.queues.size() == sb.queues.size());
    for (const auto& [q, qs] : sa.queues) {
        same_entity(qs, sb.queues.at(q));
        CHECK(qs.io_bound == sb.queues.at(q).io_bound);
    }
    CHECK(sa.hw_tag == sb.hw_tag);
    CHECK(sa.idling == sb.idling);
    for (QueueId q = 1; q <= clients; ++q)
        for (bool sync : {true, false}) {
            CHECK(a.queue_max_budget(q, sync) == b.queue_max_budget(q, sync));
            CHECK(a.inject_limit(q) == b.inject_limit(q));
        }
}

// One trace on both; returns the shortcut's resumptions.
std::uint64_t run(std::uint64_t seed, unsigned clients, unsigned groups) {
    Lcg rng{seed * 104729 + 3};
    const DeviceTraits device{rng.next(4) == 0, 1 + rng.next(4)};
    auto fast = make(device, true);
    auto slow = make(device, false);
    bfq::BfqScheduler* both[] = {fast.get(), slow.get()};
    Time now{1s};
    RequestId next_id = 1;
    std::vector<RequestId> at_device;
    std::vector<std::uint64_t> position(clients + 1, 0);
    for (GroupId g = 0; g < groups; ++g)
        for (auto* s : both) s->set_group(g, 100 * (g + 1));
    for (QueueId q = 1; q <= clients; ++q)
        for (auto* s : both) s->open_queue(q, GroupId(q % groups), now);
    // Dispatches until neither gives a request; they must agree on each.
    // Inline: each completes at once (a RAM device); else it stays at the
    // device until a completion event.
    auto dispatch = [&](bool inline_completion) {
        for (;;) {
            auto a = fast->dispatch(now);
            auto b = slow->dispatch(now);
            REQUIRE(a.has_value() == b.has_value());
            if (!a) return;
            REQUIRE(a->id == b->id);
            if (inline_completion) {
                fast->complete(a->id, now);
                slow->complete(b->id, now);
            } else {
                at_device.push_back(a->id);
            }
        }
    };
    for (int step = 0; step < 3000; ++step) {
        const unsigned action = rng.next(20);
        if (action < 9) {
            // Mostly one client streaming alone, now and then another.
            const QueueId q = rng.next(4) == 0 ? 1 + rng.next(clients) : 1;
            const bool sequential = rng.next(2) == 0;
            const std::uint64_t length = rng.next(8) == 0 ? 4096u << rng.next(6) : 4096;
            std::uint64_t offset = sequential ? position[q] : std::uint64_t(rng.next(1u << 18)) * 4096;
            offset += std::uint64_t(q) << 36;
            position[q] = offset - (std::uint64_t(q) << 36) + length;
            const bool write = rng.next(2) == 0;
            Request r{.id = next_id++, .queue = q, .group = GroupId(q % groups)};
            r.op = write ? Op::write : Op::read;
            r.offset = offset;
            r.length = length;
            r.sync = !write || rng.next(2) == 0;
            r.arrival = now;
            for (auto* s : both) s->submit(r, now);
            // The daemon asks for dispatch at once; here, not always.
            if (rng.next(3) != 0) dispatch(rng.next(4) != 0);
        } else if (action < 13) {
            if (!at_device.empty()) {
                const std::size_t i = rng.next(unsigned(at_device.size()));
                for (auto* s : both) s->complete(at_device[i], now);
                at_device.erase(at_device.begin() + std::ptrdiff_t(i));
            }
        } else if (action < 18) {
            now += rng.next(4) == 0 ? Nanos(rng.next(30) * 1'000'000) : Nanos(rng.next(20000));
            if (auto w = fast->next_wakeup(); w && *w <= now) dispatch(true);
        } else if (action == 18) {
            dispatch(rng.next(2) == 0);
        } else {
            const unsigned k = rng.next(4);
            const QueueId q = 1 + rng.next(clients);
            if (k == 0) {
                const unsigned weight = 1 + rng.next(1000);
                const GroupId g = GroupId(rng.next(groups));
                for (auto* s : both) s->set_group(g, weight);
            } else if (k == 1) {
                const char* value = rng.next(2) == 0 ? "64" : "0";
                for (auto* s : both) CHECK(s->set_tunable("max_budget", value, now).empty());
            } else if (k == 2) {
                for (auto* s : both) s->close_queue(q, now);
            } else {
                const GroupId g = GroupId(rng.next(groups));   // moves the client now and then
                for (auto* s : both) s->open_queue(q, g, now);
            }
        }
        same_view(*fast, *slow, now, clients);
    }
    CHECK(slow->lone_resumes() == 0);
    return fast->lone_resumes();
}

}   // namespace

TEST_CASE("bfq lone queue: the shortcut sees and decides what the long way does") {
    std::uint64_t resumes = 0;
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        CAPTURE(seed);
        resumes += run(seed, 1 + unsigned(seed % 4), 1 + unsigned(seed % 3));
    }
    MESSAGE("resumptions: " << resumes);
    CHECK(resumes > 1000);   // the traces do take the shortcut (2,641 when written)
}
