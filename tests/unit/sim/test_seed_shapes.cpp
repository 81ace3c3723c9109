// The seed patches' shapes, reproduced in virtual time. Each case asserts a
// direction or a ratio that a broken policy would miss; the numbers each run
// reaches are printed (MESSAGE) so the closing note can quote them.
#include <doctest/doctest.h>

#include "sim_shapes.hpp"

using namespace nbdsched;
using namespace nbdsched::sim;
using namespace nbdsched::sim::shapes;

namespace {

// Every policy is built: a factory that fails fails the case (never a skip).
void require_built(const std::string& policy) {
    std::string error;
    auto s = sched::make_scheduler(policy, sched::DeviceTraits{}, {}, error);
    REQUIRE_MESSAGE(s, error);
}

void seed000(const std::string& policy) {
    require_built(policy);
    Results idle = run(shapes::seed000(policy, "8ms"));
    Results noidle = run(shapes::seed000(policy, "0"));
    Results automatic = run(shapes::seed000(policy, "auto"));
    MESSAGE(policy << " seed000 IOPS slice_idle 8ms " << idle.total.iops << " lat "
                   << idle.total.latency.mean_us << "us; 0 " << noidle.total.iops << " lat "
                   << noidle.total.latency.mean_us << "us; auto " << automatic.total.iops);
    CHECK(noidle.total.iops > 1.5 * idle.total.iops);
    CHECK(automatic.total.ios == noidle.total.ios);   // auto = 0 on a non-rotational device
}

void seed003(const std::string& policy, double min_share) {
    require_built(policy);
    Results off = run(shapes::seed003(policy, "0"));
    Results on = run(shapes::seed003(policy, "8ms"));
    double r_off = group_ratio(off), r_on = group_ratio(on);
    MESSAGE(policy << " seed003 heavy:light group_idle 0 " << off.groups[0].mib_s << ":"
                   << off.groups[1].mib_s << " MiB/s (" << r_off << ":1); 8ms "
                   << on.groups[0].mib_s << ":" << on.groups[1].mib_s << " (" << r_on << ":1)");
    CHECK(r_on > min_share);
    CHECK(r_on > 2 * r_off);
    // The idling that buys the share costs the light group, not the heavy
    // one. (Total drops: with one sync writer per group at iodepth 1, serving
    // one group at a time leaves one request at the device instead of two.)
    CHECK(on.groups[0].mib_s > 0.85 * off.groups[0].mib_s);
    if (policy == "cfq") CHECK(r_off == doctest::Approx(1.0).epsilon(0.15));
}

void hdd_readers(const std::string& policy) {
    require_built(policy);
    Results on = run(shapes::hdd_two_readers(policy, "8ms"));
    Results off = run(shapes::hdd_two_readers(policy, "0"));
    Results automatic = run(shapes::hdd_two_readers(policy, "auto"));
    MESSAGE(policy << " hdd two sequential readers MiB/s: slice_idle 8ms " << on.total.mib_s
                   << ", 0 " << off.total.mib_s << ", auto " << automatic.total.mib_s);
    CHECK(on.total.mib_s > 5 * off.total.mib_s);
    CHECK(automatic.total.ios == on.total.ios);   // auto = 8ms on a rotational device
    // Neither reader starves while the other streams.
    CHECK(on.jobs[1].mib_s > 0.5 * on.jobs[0].mib_s);
}

void weights(const std::string& policy, const std::string& profile) {
    require_built(policy);
    Results r = run(weights_3to1(policy, profile));
    double ratio = group_ratio(r);
    MESSAGE(policy << " " << profile << " weights 300:100 service " << r.groups[0].iops << ":"
                   << r.groups[1].iops << " IOPS (" << ratio << ":1)");
    // Within 10% of 3:1, checked as plain bounds: doctest's Approx scales
    // epsilon by max(|lhs|, |rhs|), which lets more than 10% through.
    CHECK(ratio >= 2.7);
    CHECK(ratio <= 3.3);
}

}   // namespace

TEST_CASE("shape baseline: none ignores weights and never idles") {
    Results w = run(weights_3to1("none", "ssd"));
    CHECK(group_ratio(w) == doctest::Approx(1.0).epsilon(0.05));
    Results on = run(shapes::hdd_two_readers("none", ""));
    CHECK(on.total.mib_s < 20);   // two interleaved streams: every request seeks
}

TEST_CASE("seed 000 shape: cfq on ssd, idling costs IOPS, auto picks 0") { seed000("cfq"); }

TEST_CASE("seed 002 shape: bfq, 5 sync jobs, idling off wins on IOPS and stddev") {
    require_built("bfq");
    // One group is not an asymmetric scenario (Linux >= 6.0): 8ms does not
    // plug a queueing ssd. With each job in a group of its own it does.
    auto own_groups = [](Workload w) {
        for (std::size_t i = 0; i < w.jobs.size(); ++i) {
            w.groups.push_back({"g" + std::to_string(i), 100});
            w.jobs[i].group = "g" + std::to_string(i);
        }
        return w;
    };
    CHECK(run(shapes::seed002("bfq", "8ms")).total.ios == run(shapes::seed002("bfq", "0")).total.ios);
    Results on = run(own_groups(shapes::seed002("bfq", "8ms")));
    Workload no_idling = own_groups(shapes::seed002("bfq", "0"));
    no_idling.tunables["group_idle"] = "0";
    Results off = run(no_idling);
    MESSAGE("bfq seed002 slice_idle 8ms " << on.total.iops << " IOPS sd "
                                          << on.total.latency.stddev_us << "us; 0 "
                                          << off.total.iops << " IOPS sd "
                                          << off.total.latency.stddev_us << "us");
    CHECK(off.total.iops > 1.2 * on.total.iops);
    CHECK(off.total.latency.stddev_us < on.total.latency.stddev_us);
}

// With group_idle 8ms these 4 s runs reach 9.7:1 (cfq) and 8.3:1 (bfq) of the
// 10:1 the weights ask for (the 10 s workload file: 10.0:1 and 9.3:1) (the kernel's seed run: 1.64:1); 7 keeps margin
// for small model changes and still fails a policy that only half-holds.
TEST_CASE("seed 003 shape: cfq groups 1000:100 on a queueing ssd") { seed003("cfq", 7.0); }
TEST_CASE("seed 003 shape: bfq groups 1000:100 on a queueing ssd") { seed003("bfq", 7.0); }

TEST_CASE("hdd shape: cfq idling keeps two sequential readers streaming") { hdd_readers("cfq"); }
TEST_CASE("hdd shape: bfq idling keeps two sequential readers streaming") { hdd_readers("bfq"); }

TEST_CASE("hdd shape: bfq idles for four sequential readers in one group from their first request") {
    // One group is a symmetric scenario, so only idling for throughput keeps
    // each stream on the disk; a new queue must count as I/O-bound, as
    // bfq_init_bfqq marks it. When it did not, no queue idled at the start,
    // four requests reached the disk at once, bfq took the disk for one that
    // queues commands (hw_tag), and the readers seeked between streams for
    // seconds: 84 MiB/s against cfq's 156 in this run (exp5: 66 against 128).
    require_built("bfq");
    Results bfq = run(shapes::hdd_sequential_readers("bfq", "8ms", 4));
    Results cfq = run(shapes::hdd_sequential_readers("cfq", "8ms", 4));
    MESSAGE("hdd four sequential readers MiB/s: bfq " << bfq.total.mib_s << ", cfq " << cfq.total.mib_s
                                                      << ", bfq hw_tag " << bfq.scheduler.hw_tag);
    CHECK(bfq.total.mib_s > 0.9 * cfq.total.mib_s);
    CHECK(bfq.total.mib_s > 140);   // the disk streams 170 MiB/s
    CHECK_FALSE(bfq.scheduler.hw_tag);
}

TEST_CASE("weights 3:1: bfq on ssd") { weights("bfq", "ssd"); }
TEST_CASE("weights 3:1: bfq on hdd") { weights("bfq", "hdd"); }
TEST_CASE("weights 3:1: cfq on ssd") { weights("cfq", "ssd"); }

namespace {

// slice_idle changed mid-run, measured after the change: the run behaves
// like one started with the new value (no lost or stuck requests either).
void runtime_change(const std::string& policy) {
    require_built(policy);
    Workload w = shapes::hdd_two_readers(policy, "8ms");
    w.runtime = 4s;
    w.ramp_time = 2s;
    w.changes.push_back({1s, "slice_idle", "0"});
    Results off = run(w);
    w.changes[0].value = "8ms";
    w.tunables["slice_idle"] = "0";
    Results on = run(w);
    MESSAGE(policy << " hdd readers after a run-time change: 8ms->0 " << off.total.mib_s
                   << " MiB/s, 0->8ms " << on.total.mib_s << " MiB/s");
    CHECK(on.total.mib_s > 5 * off.total.mib_s);
    CHECK(off.total.ios > 0);
}

}   // namespace

TEST_CASE("run-time slice_idle change takes effect: cfq") { runtime_change("cfq"); }
TEST_CASE("run-time slice_idle change takes effect: bfq") { runtime_change("bfq"); }
