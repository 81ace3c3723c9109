// Every observable decision of cfq and bfq over randomized event traces,
// folded into one digest per policy and trace shape and pinned. The traces mix
// what the daemon does on a RAM device (requests complete inline, one queue or
// many) with a slow device, idle timers, closing and reopening clients,
// re-weighting and tunable changes. What is hashed is all a driver can see:
// each dispatched request and the time, next_wakeup() and the queued and
// in-flight counts after every event, get_tunable() of every tunable, and the
// counters of stats() (slices and idle time per group, client and device).
//
// A change that only makes a scheduler cheaper must leave these digests as
// they are; one that changes a decision on purpose updates them (the failure
// prints the new values) and says why in its commit. bfq's lone-queue
// shortcut (sched/bfq/lone.cpp) only makes bfq cheaper: the traces take it
// (counted below) and the digests stayed those pinned before it.
#include <doctest/doctest.h>

#include <cstdio>
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

// FNV-1a over 64-bit words.
struct Digest {
    std::uint64_t h = 1469598103934665603ull;
    void add(std::uint64_t v) {
        for (int i = 0; i < 8; ++i) {
            h ^= (v >> (8 * i)) & 0xff;
            h *= 1099511628211ull;
        }
    }
    void add(Nanos t) { add(std::uint64_t(t.count())); }
    void add(const std::optional<Time>& t) { add(t ? std::uint64_t(t->count()) : ~std::uint64_t{0}); }
    void add(const std::string& s) {
        add(s.size());
        for (char c : s) add(std::uint64_t(static_cast<unsigned char>(c)));
    }
    void add(const EntityStats& s) {
        for (std::uint64_t v : {s.dispatched, s.completed, s.dispatched_sectors, s.slices, s.queued, s.in_flight})
            add(v);
        add(s.idle_time);
    }
};

// The run-time changes a trace may make: a tunable of both policies or of
// one ("" for both), and the values it may be set to.
using Change = std::pair<std::string, std::string>;

std::vector<Change> knobs(const std::string& policy) {
    struct Row {
        const char* policy;
        const char* name;
        std::vector<const char*> values;
    };
    static const Row rows[] = {
        {"", "slice_idle", {"0", "8ms", "auto"}},
        {"", "group_idle", {"0", "2ms"}},
        {"", "fifo_expire_sync", {"5ms"}},
        {"", "back_seek_max", {"0", "16384"}},
        {"", "contended_seeky_depth", {"0", "1"}},
        {"bfq", "strict_guarantees", {"1", "0"}},
        {"bfq", "max_budget", {"64", "0"}},
        {"bfq", "timeout_sync", {"10ms", "125ms"}},
        {"cfq", "slice_sync", {"20ms", "100ms"}},
        {"cfq", "quantum", {"2", "8"}},
        {"cfq", "low_latency", {"0", "1"}},
        {"cfq", "iops_charge_kb", {"64", "0"}},
    };
    std::vector<Change> out;
    for (const Row& row : rows) {
        if (*row.policy && policy != row.policy) continue;
        for (const char* v : row.values) out.emplace_back(row.name, v);
    }
    return out;
}

struct Shape {
    unsigned queues;    // clients 1..queues
    unsigned groups;    // client q is in group q % groups
    bool inline_only;   // every dispatched request completes at once (a RAM device)
    bool changes;       // close/reopen, re-weight, tunables
    int steps;
};

// bfq's lone-queue resumptions over the traces run so far.
std::uint64_t lone_resumes = 0;

std::uint64_t run_trace(const std::string& policy, const Shape& shape, std::uint64_t seed) {
    Lcg rng{seed * 7919 + 17};
    const bool rotational = rng.next(3) == 0;
    const unsigned depth = 1 + rng.next(32);
    std::string err;
    auto s = make_scheduler(policy, DeviceTraits{rotational, depth}, {}, err);
    REQUIRE(s);
    Digest d;
    d.add(rotational);
    d.add(depth);
    Time now = Time{1s};
    RequestId next_id = 1;
    std::vector<RequestId> at_device;
    std::vector<std::uint64_t> position(shape.queues + 1, 0);
    std::vector<bool> closed(shape.queues + 1, false);
    struct Style {
        unsigned sequential;   // 0 never, 1 half the time, 2 always
        unsigned writes;       // 0 reads, 1 both, 2 writes
    };
    std::vector<Style> style(shape.queues + 1);
    for (auto& st : style) st = Style{rng.next(3), rng.next(3)};
    const std::vector<std::string> names = s->tunable_names();
    const std::vector<Change> changes = knobs(policy);

    for (GroupId g = 0; g < shape.groups; ++g) s->set_group(g, 100 * (g + 1));
    for (QueueId q = 1; q <= shape.queues; ++q) s->open_queue(q, GroupId(q % shape.groups), now);

    auto observe = [&] {
        d.add(s->next_wakeup());
        d.add(s->queued());
        d.add(s->in_flight());
    };
    auto drain = [&] {
        while (auto r = s->dispatch(now)) {
            d.add(r->id);
            d.add(now);
            if (shape.inline_only) {
                s->complete(r->id, now);
            } else {
                at_device.push_back(r->id);
            }
            observe();
        }
        observe();
    };
    auto advance = [&](Nanos by) {
        const Time target = now + by;
        while (auto w = s->next_wakeup()) {
            if (*w > target) break;
            now = std::max(now, *w);
            drain();
            if (s->next_wakeup() == w) break;
        }
        now = target;
        drain();
    };

    for (int step = 0; step < shape.steps; ++step) {
        const unsigned action = rng.next(16);
        if (action < 7) {
            const QueueId q = 1 + rng.next(shape.queues);
            if (closed[q]) {
                s->open_queue(q, GroupId(q % shape.groups), now);
                closed[q] = false;
            }
            // Each client has a style: a sequential stream, random 4k, or a
            // mix; reads, writes or both; now and then a large transfer.
            const Style& st = style[q];
            const bool sequential = st.sequential == 2 || (st.sequential == 1 && rng.next(2) == 0);
            const std::uint64_t length = rng.next(8) == 0 ? 4096u << rng.next(9) : 4096;
            std::uint64_t offset = sequential ? position[q] : std::uint64_t(rng.next(1u << 18)) * 4096;
            offset += q << 36;
            position[q] = offset - (q << 36) + length;
            const bool write = st.writes == 2 || (st.writes == 1 && rng.next(2) == 0);
            Request r{.id = next_id++, .queue = q, .group = GroupId(q % shape.groups)};
            r.op = write ? Op::write : Op::read;
            r.offset = offset;
            r.length = length;
            r.sync = !write || rng.next(2) == 0;
            r.arrival = now;
            s->submit(r, now);
            observe();
        } else if (action < 10) {
            if (!at_device.empty()) {
                const std::size_t i = rng.next(unsigned(at_device.size()));
                s->complete(at_device[i], now);
                at_device.erase(at_device.begin() + std::ptrdiff_t(i));
                observe();
            }
        } else if (action < 14) {
            // Mostly the microseconds between requests; now and then long
            // enough for idle timers, slices and budgets to run out.
            const unsigned scale = rng.next(8);
            advance(scale < 5 ? Nanos(rng.next(20000)) : scale < 7 ? Nanos(rng.next(3000) * 1000)
                                                                   : Nanos(rng.next(200) * 1'000'000));
        } else if (shape.changes && action == 14) {
            const unsigned k = rng.next(unsigned(changes.size()) + 2);
            if (k < changes.size()) {
                CHECK(s->set_tunable(changes[k].first, changes[k].second, now).empty());
            } else if (k == changes.size()) {
                // Drawn one at a time: the order of a call's arguments is
                // unspecified (g++ and clang differ), and so would the trace be.
                const unsigned weight = 1 + rng.next(1000);
                s->set_group(GroupId(rng.next(shape.groups)), weight);
            } else {
                const QueueId q = 1 + rng.next(shape.queues);
                s->close_queue(q, now);
                closed[q] = true;
            }
            observe();
        }
        drain();
        if (step % 64 == 0) {
            for (const auto& n : names) d.add(*s->get_tunable(n));
            const SchedulerStats st = s->stats(now);
            d.add(st.device);
            for (const auto& [g, gs] : st.groups) {
                d.add(g);
                d.add(gs);
                d.add(gs.weight);
            }
            for (const auto& [q, qs] : st.queues) {
                d.add(q);
                d.add(qs);
            }
            d.add(st.hw_tag);
            d.add(st.idling);
        }
    }
    // Wind down: everything completes.
    for (int round = 0; round < 100000 && (s->queued() || s->in_flight()); ++round) {
        for (RequestId id : at_device) s->complete(id, now);
        at_device.clear();
        drain();
        advance(1ms);
    }
    CHECK(s->queued() == 0);
    CHECK(s->in_flight() == 0);
    d.add(s->stats(now).device);
    d.add(now);
    if (const auto* b = dynamic_cast<const bfq::BfqScheduler*>(s.get())) lone_resumes += b->lone_resumes();
    return d.h;
}

std::uint64_t digest(const std::string& policy, const Shape& shape, std::uint64_t seeds) {
    Digest all;
    for (std::uint64_t seed = 1; seed <= seeds; ++seed) all.add(run_trace(policy, shape, seed));
    return all.h;
}

void check(const std::string& policy, const Shape& shape, std::uint64_t seeds, std::uint64_t pinned) {
    lone_resumes = 0;
    const std::uint64_t got = digest(policy, shape, seeds);
    if (got != pinned) std::printf("%s: digest 0x%016llxull\n", policy.c_str(), static_cast<unsigned long long>(got));
    CHECK(got == pinned);
    // The shortcut is part of what is pinned where requests complete at once
    // (a device that holds requests seldom leaves a lone queue with none in
    // flight).
    if (policy == "bfq" && shape.inline_only) {
        MESSAGE("lone-queue resumptions: " << lone_resumes);
        CHECK(lone_resumes > std::uint64_t(shape.steps) * seeds / 100);
    }
}

constexpr Shape kInlineOne{.queues = 1, .groups = 1, .inline_only = true, .changes = false, .steps = 6000};
constexpr Shape kInlineMany{.queues = 6, .groups = 3, .inline_only = true, .changes = true, .steps = 6000};
constexpr Shape kDevice{.queues = 10, .groups = 4, .inline_only = false, .changes = true, .steps = 6000};

}   // namespace

TEST_CASE("decision digest: bfq, one queue, inline completion") { check("bfq", kInlineOne, 48, 0xf755234d7b609751ull); }
TEST_CASE("decision digest: bfq, many queues, inline completion") { check("bfq", kInlineMany, 48, 0xa03e44b581498a36ull); }
TEST_CASE("decision digest: bfq, a device holding requests") { check("bfq", kDevice, 48, 0xf43af12fb2ab9aeeull); }
TEST_CASE("decision digest: cfq, one queue, inline completion") { check("cfq", kInlineOne, 48, 0x7bfe609577ef1b99ull); }
TEST_CASE("decision digest: cfq, many queues, inline completion") { check("cfq", kInlineMany, 48, 0x207dc689bb4a0ac0ull); }
TEST_CASE("decision digest: cfq, a device holding requests") { check("cfq", kDevice, 48, 0x64d071649de84fe1ull); }
