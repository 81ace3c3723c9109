// Reservations, limits and latency targets in virtual time, on the hdd
// profile, in front of none, cfq and bfq. The numbers each run reaches are
// printed (MESSAGE) for docs/qos.md.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "sched/qos/qos_scheduler.hpp"
#include "timing/profiles.hpp"
#include "sim_shapes.hpp"

using namespace nbdsched;
using namespace nbdsched::sim;
using namespace nbdsched::sim::shapes;

namespace {

constexpr Nanos k_runtime = 10s, k_ramp = 1s;

// A greedy reader (qd32), one reserved 60 IOPS (qd4), one limited to 20 IOPS (qd8): 4k random reads.
// 20 s: a limited group's backlog inside the policy at either end of the
// measured time moves its rate by up to iodepth / measured.
Workload three_groups(const std::string& policy, bool qos, Nanos slack = Nanos(0)) {
    Workload w = base("hdd", policy, "", "", 2 * k_runtime, 2 * k_ramp);
    w.timer_slack = slack;
    w.groups = {{"greedy", 100}, {"reserved", 100}, {"limited", 100}};
    if (qos) {
        w.groups[1].qos.reserve.iops = 60;
        w.groups[2].qos.limit.iops = 20;
    }
    w.jobs.push_back(job("greedy", "greedy", sched::Op::read, Pattern::random, 4096, 32, 64ull << 30));
    w.jobs.push_back(job("reserved", "reserved", sched::Op::read, Pattern::random, 4096, 4, 64ull << 30));
    w.jobs.push_back(job("limited", "limited", sched::Op::read, Pattern::random, 4096, 8, 64ull << 30));
    return w;
}

double iops_of(const Results& r, const std::string& group) {
    for (const auto& g : r.groups)
        if (g.name == group) return g.iops;
    FAIL("no group " << group);
    return 0;
}

void three_groups_case(const std::string& policy, Nanos slack = Nanos(0)) {
    Results off = run(three_groups(policy, false, slack));
    Results on = run(three_groups(policy, true, slack));
    double reserved = iops_of(on, "reserved"), limited = iops_of(on, "limited");
    MESSAGE(policy << " hdd: greedy/reserved/limited IOPS without QoS " << iops_of(off, "greedy") << "/"
                   << iops_of(off, "reserved") << "/" << iops_of(off, "limited") << ", with QoS "
                   << iops_of(on, "greedy") << "/" << reserved << "/" << limited << ", busy "
                   << on.utilisation * 100 << "%, total " << on.total.iops << " (was " << off.total.iops << ")");
    for (const auto& [id, q] : on.scheduler.qos)
        MESSAGE("group " << id << ": depth cap " << q.depth_cap << ", floor dispatches " << q.reserved_dispatches
                         << ", below floor " << format_duration(q.below_reservation) << ", throttled "
                         << format_duration(q.throttled_time) << ", delayed " << q.limit_delayed);
    CHECK(reserved >= 60 * 0.95);
    CHECK(limited <= 20 * 1.02);
    CHECK(limited >= 20 * 0.98);
    CHECK(on.utilisation >= 0.95);
    CHECK(on.late_wakeups == 0);
    REQUIRE(on.scheduler.qos.count(3) == 1);
    CHECK(on.scheduler.qos.at(3).limit_delayed > 0);
    CHECK(on.scheduler.qos.at(3).throttled_time > 1s);
}

// Records each completion's latency by group, as a driver sees it.
class Recorder final : public sched::Scheduler {
public:
    explicit Recorder(std::unique_ptr<sched::Scheduler> inner) : inner_(std::move(inner)) {}
    struct Sample {
        Nanos at, latency;
    };
    std::map<sched::GroupId, std::vector<Sample>> samples;

    std::string_view policy() const override { return inner_->policy(); }
    void set_group(sched::GroupId g, unsigned w) override { inner_->set_group(g, w); }
    void open_queue(sched::QueueId q, sched::GroupId g, sched::Time now) override { inner_->open_queue(q, g, now); }
    void close_queue(sched::QueueId q, sched::Time now) override { inner_->close_queue(q, now); }
    void submit(const sched::Request& r, sched::Time now) override {
        arrivals_[r.id] = {r.group, now};
        inner_->submit(r, now);
    }
    std::optional<sched::Request> dispatch(sched::Time now) override { return inner_->dispatch(now); }
    void complete(sched::RequestId id, sched::Time now) override {
        auto [group, at] = arrivals_.at(id);
        samples[group].push_back({now, now - at});
        arrivals_.erase(id);
        inner_->complete(id, now);
    }
    std::optional<sched::Time> next_wakeup() const override { return inner_->next_wakeup(); }
    std::vector<std::string> tunable_names() const override { return inner_->tunable_names(); }
    std::optional<std::string> get_tunable(std::string_view n) const override { return inner_->get_tunable(n); }
    std::string set_tunable(std::string_view n, std::string_view v, sched::Time now) override {
        return inner_->set_tunable(n, v, now);
    }
    std::size_t queued() const override { return inner_->queued(); }
    std::size_t in_flight() const override { return inner_->in_flight(); }
    sched::SchedulerStats stats(sched::Time now) const override { return inner_->stats(now); }

private:
    std::unique_ptr<sched::Scheduler> inner_;
    std::map<sched::RequestId, std::pair<sched::GroupId, sched::Time>> arrivals_;
};

struct LatencyRun {
    Results results;
    double windows_met = 0;   // fraction of 1 s windows whose reader p90 met 50 ms
    Nanos worst_p90{0};
};

// A qd1 random reader against a greedy random writer (qd32); the reader's
// group may have a 50 ms latency target.
LatencyRun reader_writer(const std::string& policy, bool target, Nanos slack = Nanos(0)) {
    Workload w = base("hdd", policy, "", "", k_runtime, k_ramp);
    w.timer_slack = slack;
    w.groups = {{"reader", 100}, {"writer", 100}};
    w.jobs.push_back(job("reader", "reader", sched::Op::read, Pattern::random, 4096, 1, 64ull << 30));
    w.jobs.push_back(job("writer", "writer", sched::Op::write, Pattern::random, 4096, 32, 64ull << 30));
    std::string error;
    auto model = timing::make_model("hdd", {}, error);
    REQUIRE(model);
    sched::DeviceTraits traits{model->rotational(), model->queue_depth()};
    auto inner = sched::make_scheduler(policy, traits, {}, error);
    REQUIRE(inner);
    auto layer = sched::qos::with_qos(std::move(inner), traits);
    sched::qos::GroupQos q;
    q.latency_target = 50ms;
    if (target) REQUIRE(layer->set_qos(1, q, sched::Time{}).empty());   // "reader" is group 1
    Recorder recorder(std::move(layer));
    LatencyRun out;
    out.results = simulate(w, recorder, *model, error);
    REQUIRE_MESSAGE(error.empty(), error);
    std::map<std::int64_t, std::vector<Nanos>> windows;
    for (const auto& s : recorder.samples[1])
        if (s.at >= k_ramp) windows[(s.at - k_ramp) / 1s].push_back(s.latency);
    int met = 0;
    for (auto& [index, lat] : windows) {
        auto p90 = lat.begin() + static_cast<std::ptrdiff_t>(std::min(lat.size() - 1, lat.size() * 9 / 10));
        std::nth_element(lat.begin(), p90, lat.end());
        out.worst_p90 = std::max(out.worst_p90, *p90);
        if (*p90 <= 50ms) ++met;
    }
    std::int64_t expected = (k_runtime - k_ramp) / 1s;
    CHECK(std::int64_t(windows.size()) >= expected - 1);
    out.windows_met = double(met) / double(std::max<std::int64_t>(expected, 1));
    return out;
}

void latency_case(const std::string& policy) {
    LatencyRun off = reader_writer(policy, false);
    LatencyRun on = reader_writer(policy, true);
    double kept = on.results.total.iops / off.results.total.iops;
    MESSAGE(policy << " hdd: reader p90 worst 1 s window " << format_duration(off.worst_p90) << " -> "
                   << format_duration(on.worst_p90) << ", windows met " << off.windows_met * 100 << "% -> "
                   << on.windows_met * 100 << "%, reader " << off.results.jobs[0].iops << " -> "
                   << on.results.jobs[0].iops << " IOPS, total kept " << kept * 100 << "%");
    CHECK(on.windows_met >= 0.99);
    CHECK(kept >= 0.80);
    CHECK(on.results.late_wakeups == 0);
}

// cfq with every completion up to 10 ms late: the reader's next request
// often comes after slice_idle, cfq expires its queue and it waits out the
// writer's 100 ms slice (78% of windows met without a target, 67% with the
// depth cap alone). The writer held at the gate while the reader's request
// waits in the policy meets it. Total kept is printed, not asserted: 72%
// here, 71% with the depth cap alone, both below the 80% met on time.
void latency_late_case(const std::string& policy) {
    LatencyRun off = reader_writer(policy, false, 10ms);
    LatencyRun on = reader_writer(policy, true, 10ms);
    double kept = on.results.total.iops / off.results.total.iops;
    MESSAGE(policy << " hdd, late timers: reader p90 worst 1 s window " << format_duration(off.worst_p90) << " -> "
                   << format_duration(on.worst_p90) << ", windows met " << off.windows_met * 100 << "% -> "
                   << on.windows_met * 100 << "%, total kept " << kept * 100 << "%");
    CHECK(on.windows_met >= 0.99);
    CHECK(on.results.late_wakeups == 0);
}

}   // namespace

TEST_CASE("qos: none hdd, reserve 60 IOPS and limit 20 IOPS beside a greedy reader") { three_groups_case("none"); }
TEST_CASE("qos: cfq hdd, reserve 60 IOPS and limit 20 IOPS beside a greedy reader") { three_groups_case("cfq"); }
TEST_CASE("qos: bfq hdd, reserve 60 IOPS and limit 20 IOPS beside a greedy reader") { three_groups_case("bfq"); }
// The daemon's timers on a loaded host: every wake-up (the limit's release
// among them) and every completion comes up to 10 ms late. The bucket keeps
// what accrued past the ideal release time, so the limit still holds (the
// measured 18.6-19.4 IOPS end to end were fio's accounting, not lost tokens:
// bench/lib/common.py server_window).
TEST_CASE("qos: none hdd, reserve and limit with late timers") { three_groups_case("none", 10ms); }
TEST_CASE("qos: cfq hdd, reserve and limit with late timers") { three_groups_case("cfq", 10ms); }
TEST_CASE("qos: bfq hdd, reserve and limit with late timers") { three_groups_case("bfq", 10ms); }
TEST_CASE("qos: none hdd, 50 ms p90 target for a qd1 reader against a greedy writer") { latency_case("none"); }
TEST_CASE("qos: cfq hdd, 50 ms p90 target for a qd1 reader against a greedy writer") { latency_case("cfq"); }
TEST_CASE("qos: bfq hdd, 50 ms p90 target for a qd1 reader against a greedy writer") { latency_case("bfq"); }
TEST_CASE("qos: cfq hdd, 50 ms p90 target with late timers") { latency_late_case("cfq"); }
