// BFQ: when the scenario is asymmetric (idling for service guarantees) and
// what other queues may inject while the device is plugged.
#include "test_bfq_rig.hpp"

#include "sched/bfq/scheduler.hpp"

using namespace bfqtest;
using nbdsched::sched::bfq::BfqScheduler;

namespace {

BfqScheduler& as_bfq(Scheduler& s) { return dynamic_cast<BfqScheduler&>(s); }

Request req(RequestId id, QueueId q, GroupId g, std::uint64_t sector) {
    return Request{.id = id, .queue = q, .group = g, .offset = sector * 512, .length = 4096};
}

// Forwards to a BfqScheduler and checks every injected dispatch against the
// limit of the queue in service (the other client: two clients only).
class LimitProbe final : public Scheduler {
public:
    explicit LimitProbe(std::unique_ptr<Scheduler> inner) : inner_(std::move(inner)) {}
    std::string_view policy() const override { return inner_->policy(); }
    void set_group(GroupId g, unsigned w) override { inner_->set_group(g, w); }
    void open_queue(QueueId q, GroupId g, Time now) override { inner_->open_queue(q, g, now); }
    void close_queue(QueueId q, Time now) override { inner_->close_queue(q, now); }
    void submit(const Request& r, Time now) override { inner_->submit(r, now); }
    std::optional<Request> dispatch(Time now) override {
        BfqScheduler& b = as_bfq(*inner_);
        const std::uint64_t before = b.injected();
        const std::size_t in_flight = b.in_flight();
        auto r = inner_->dispatch(now);
        if (r && b.injected() > before) {
            ++injections;
            // The in-service queue is the other client's sync queue; its
            // limit (raised from 0 to 1 after a whole idle period without a
            // baseline) bounds the requests already in the device.
            unsigned limit = b.inject_limit(r->queue == 1 ? 2 : 1).value_or(0);
            max_limit = std::max(max_limit, limit);
            if (in_flight >= std::max(limit, 1u)) ++over_limit;
        }
        return r;
    }
    void complete(RequestId id, Time now) override { inner_->complete(id, now); }
    std::optional<Time> next_wakeup() const override { return inner_->next_wakeup(); }
    std::vector<std::string> tunable_names() const override { return inner_->tunable_names(); }
    std::optional<std::string> get_tunable(std::string_view n) const override { return inner_->get_tunable(n); }
    std::string set_tunable(std::string_view n, std::string_view v, Time now) override {
        return inner_->set_tunable(n, v, now);
    }
    std::size_t queued() const override { return inner_->queued(); }
    std::size_t in_flight() const override { return inner_->in_flight(); }
    SchedulerStats stats(Time now) const override { return inner_->stats(now); }

    std::uint64_t injections = 0;
    std::uint64_t over_limit = 0;
    unsigned max_limit = 0;

private:
    std::unique_ptr<Scheduler> inner_;
};

struct Shares {
    double heavy_mib_s = 0, light_mib_s = 0, heavy_lat_us = 0;
    std::uint64_t injections = 0, over_limit = 0;
    unsigned max_limit = 0;
};

// Seed 003 with a client round trip: groups 1000:100, one sync sequential
// writer each at iodepth 1 with `think` between a completion and the next
// request (the light one a little longer, so that the two do not run in
// lockstep); slice_idle 0, group_idle 8ms (the defaults on flash).
Shares writers(const std::string& policy, FakeDevice dev, Nanos think, std::uint64_t block, bool light = true) {
    std::string err;
    auto inner = make_scheduler(policy, DeviceTraits{false, 32}, {}, err);
    REQUIRE(inner);
    LimitProbe* probe = nullptr;
    std::unique_ptr<Scheduler> s = std::move(inner);
    if (policy == "bfq") {
        auto p = std::make_unique<LimitProbe>(std::move(s));
        probe = p.get();
        s = std::move(p);
    }
    Rig rig(std::move(s), dev, 32);
    rig.sched().set_group(1, 1000);
    rig.sched().set_group(2, 100);
    rig.add(Job{.queue = 1, .group = 1, .op = Op::write, .sequential = true, .block = block, .think = think, .region = 1ull << 36});
    if (light)
        rig.add(Job{.queue = 2, .group = 2, .op = Op::write, .sequential = true, .block = block, .think = think + 37us, .region = 2ull << 36});
    rig.run(Time{1s});
    rig.reset_counts();
    rig.run(Time{11s});
    Shares out;
    const auto& h = rig.jobs()[0];
    out.heavy_mib_s = double(h.bytes) / 10.0 / (1 << 20);
    out.heavy_lat_us = h.lat_sum / double(h.done);
    if (light) out.light_mib_s = double(rig.jobs()[1].bytes) / 10.0 / (1 << 20);
    if (probe) out.injections = probe->injections, out.over_limit = probe->over_limit, out.max_limit = probe->max_limit;
    return out;
}

}   // namespace

TEST_CASE("bfq asymmetric scenario: one group is not idled for, two groups are") {
    // A queueing SSD, so idling for throughput is off: only service
    // guarantees could make BFQ idle.
    for (auto tunables : {Tunables{{"slice_idle", "0"}, {"group_idle", "8ms"}}, Tunables{{"slice_idle", "8ms"}}}) {
        CAPTURE(tunables.begin()->second);
        // A lone sync queue in a single group: nobody's share to protect.
        auto s = make(false, 32, tunables);
        s->open_queue(1, 1, Time{});
        s->submit(req(1, 1, 1, 0), Time{});
        REQUIRE(s->dispatch(Time{}));
        s->complete(1, Time{100us});
        CHECK_FALSE(s->next_wakeup());
        CHECK_FALSE(s->stats(Time{100us}).idling);

        // Two groups with pending I/O: the emptied queue keeps the device.
        s = make(false, 32, tunables);
        s->open_queue(1, 1, Time{});
        s->open_queue(2, 2, Time{});
        s->submit(req(1, 1, 1, 0), Time{});
        s->submit(req(2, 2, 2, 1000000), Time{});
        auto first = s->dispatch(Time{});
        REQUIRE(first);
        CHECK_FALSE(s->dispatch(Time{}));   // plugged: no baseline yet, so no injection either
        s->complete(first->id, Time{100us});
        REQUIRE(s->next_wakeup());
        CHECK(*s->next_wakeup() == Time{100us + 8ms});
        CHECK(s->stats(Time{100us}).idling);
    }
}

TEST_CASE("bfq injection: the light group fills the heavy one's think time, weights hold") {
    // 8 channels of 100 us, clients that come back 150 us after a completion
    // (the NBD round trip): without injection the device sits idle while the
    // heavy writer thinks, and the light one waits for its own turns.
    FakeDevice ssd{8, 100us, 100us};
    Shares none = writers("none", ssd, 150us, 32768);
    Shares alone = writers("bfq", ssd, 150us, 32768, false);
    Shares bfq = writers("bfq", ssd, 150us, 32768);
    double share = bfq.heavy_mib_s / bfq.light_mib_s;
    double total = (bfq.heavy_mib_s + bfq.light_mib_s) / (none.heavy_mib_s + none.light_mib_s);
    MESSAGE("none " << none.heavy_mib_s << " + " << none.light_mib_s << " MiB/s; bfq heavy alone "
                    << alone.heavy_mib_s << "; bfq " << bfq.heavy_mib_s << " + " << bfq.light_mib_s << " MiB/s ("
                    << share << ":1, " << 100 * total << "% of none), " << bfq.injections
                    << " injected, largest limit " << bfq.max_limit);
    CHECK(bfq.injections > 500);
    CHECK(bfq.over_limit == 0);
    CHECK(share > 8.0);   // the weights ask for 10:1
    // The heavy writer keeps most of what it gets alone (it loses the light
    // group's own budgets, not its injected requests). At iodepth 1 the
    // total is bounded by (1 + 1/10) x the heavy writer alone over `none`,
    // here 58%.
    CHECK(bfq.heavy_mib_s > 0.85 * alone.heavy_mib_s);
    CHECK(total > 0.5);
}

TEST_CASE("bfq injection: limits follow the in-service queue's measured service time") {
    // One channel: an injected request makes the heavy writer's next one
    // wait behind it, which the 3/2 rule of bfq_update_inject_limit catches.
    FakeDevice one{1, 100us, 100us};
    Shares alone = writers("bfq", one, 150us, 4096, false);
    Shares bfq = writers("bfq", one, 150us, 4096);
    MESSAGE("one channel: heavy latency alone " << alone.heavy_lat_us << " us, with injection "
                                                << bfq.heavy_lat_us << " us; " << bfq.injections
                                                << " injected, largest limit " << bfq.max_limit);
    CHECK(bfq.over_limit == 0);
    CHECK(bfq.heavy_lat_us < 1.5 * alone.heavy_lat_us);
    CHECK(bfq.heavy_mib_s / bfq.light_mib_s > 6.0);
}
