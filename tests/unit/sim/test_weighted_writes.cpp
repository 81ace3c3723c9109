// Plain writes under default device settings: a group's weight holds for
// them as it does for reads (writes are sync by default, docs/writes.md).
// The numbers each run reaches are printed (MESSAGE) for docs/writes.md.
#include <doctest/doctest.h>

#include <initializer_list>
#include <utility>

#include "sim_shapes.hpp"

using namespace nbdsched;
using namespace nbdsched::sim;
using namespace nbdsched::sim::shapes;

namespace {

constexpr std::uint64_t k_bs = 32 * 1024;   // fio --bs=32k, as bench/exp9 runs it

Nanos runtime_for(const std::string& profile) { return profile == "hdd" ? Nanos(12s) : Nanos(2s); }

// Groups weighted 1000 and 100, one sequential writer each in its own region,
// default tunables. `sync` false is what `writes_sync: false` makes of them.
Workload two_writers(const std::string& policy, const std::string& profile, unsigned iodepth, bool sync) {
    Workload w = base(profile, policy, "", "", runtime_for(profile), 500ms);
    w.groups = {{"heavy", 1000}, {"light", 100}};
    for (const char* g : {"heavy", "light"}) {
        w.jobs.push_back(job(g, g, sched::Op::write, Pattern::sequential, k_bs, iodepth, 8ull << 30));
        w.jobs.back().sync = sync;
    }
    return w;
}

// A sequential reader and a sequential writer, groups of equal weight. The
// reader's requests are `reader_bs`: the daemon's read-ahead turns a 32 KiB
// reader into prefetches of the window's size (512 KiB on the ssd).
Workload reader_writer(const std::string& policy, const std::string& profile, unsigned iodepth,
                       std::uint64_t reader_bs = k_bs, const std::string& iops_charge_kb = "") {
    Workload w = base(profile, policy, "iops_charge_kb", iops_charge_kb, runtime_for(profile), 500ms);
    w.groups = {{"reader", 100}, {"writer", 100}};
    w.jobs.push_back(
        job("reader", "reader", sched::Op::read, Pattern::sequential, reader_bs, iodepth, 8ull << 30));
    w.jobs.push_back(job("writer", "writer", sched::Op::write, Pattern::sequential, k_bs, iodepth, 8ull << 30));
    return w;
}

// The target: 8:1 for every policy, profile and depth (the weights ask 10:1).
constexpr double k_min_share = 8.0;

void two_writers_case(const std::string& policy, const std::string& profile) {
    for (unsigned depth : {1u, 4u, 16u}) {
        CAPTURE(depth);
        Results r = run(two_writers(policy, profile, depth, true));
        Results async = run(two_writers(policy, profile, depth, false));
        Results none = run(two_writers("none", profile, depth, true));
        double ratio = group_ratio(r), total = r.total.mib_s / none.total.mib_s;
        MESSAGE(policy << " " << profile << " qd" << depth << " writers 1000:100 " << r.groups[0].mib_s << ":"
                       << r.groups[1].mib_s << " MiB/s (" << ratio << ":1), total " << total
                       << " of none; writes_sync false " << group_ratio(async) << ":1");
        CHECK(ratio >= k_min_share);
        if (depth >= 4) CHECK(total >= 0.85);
    }
}

// Each job's device share: its throughput together over its throughput alone.
std::pair<double, double> reader_writer_shares(const Workload& both) {
    Results r = run(both);
    Workload alone = both;
    alone.jobs.resize(1);
    double reader_alone = run(alone).total.mib_s;
    alone.jobs = {both.jobs[1]};
    double writer_alone = run(alone).total.mib_s;
    const double reader = r.jobs[0].mib_s / reader_alone, writer = r.jobs[1].mib_s / writer_alone;
    MESSAGE(both.policy << " " << both.profile << " qd" << both.jobs[0].iodepth << " reader bs "
                        << (both.jobs[0].block_size >> 10) << "k, reader:writer 1:1 " << r.jobs[0].mib_s << ":"
                        << r.jobs[1].mib_s << " MiB/s, device share " << reader << ":" << writer);
    return {reader, writer};
}

void reader_writer_case(const std::string& policy, const std::string& profile, std::uint64_t reader_bs = k_bs,
                        std::initializer_list<unsigned> depths = {1u, 4u}) {
    for (unsigned depth : depths) {
        CAPTURE(depth);
        auto [reader, writer] = reader_writer_shares(reader_writer(policy, profile, depth, reader_bs));
        CHECK(reader >= 0.40);
        CHECK(writer >= 0.40);
    }
}

}   // namespace

TEST_CASE("weighted writes: cfq ssd, groups 1000:100 at qd 1, 4, 16") { two_writers_case("cfq", "ssd"); }
TEST_CASE("weighted writes: bfq ssd, groups 1000:100 at qd 1, 4, 16") { two_writers_case("bfq", "ssd"); }
TEST_CASE("weighted writes: cfq hdd, groups 1000:100 at qd 1, 4, 16") { two_writers_case("cfq", "hdd"); }
TEST_CASE("weighted writes: bfq hdd, groups 1000:100 at qd 1, 4, 16") { two_writers_case("bfq", "hdd"); }

TEST_CASE("weighted writes: cfq ssd, a reader and a writer at 1:1") { reader_writer_case("cfq", "ssd"); }
TEST_CASE("weighted writes: bfq ssd, a reader and a writer at 1:1") { reader_writer_case("bfq", "ssd"); }
TEST_CASE("weighted writes: cfq hdd, a reader and a writer at 1:1") { reader_writer_case("cfq", "hdd"); }
// The daemon's read-ahead reads for a 32 KiB reader at iodepth 4 (exp9) in
// 512 KiB prefetches, several in flight. cfq's IOPS mode (ssd: slice_idle 0)
// charged one per request, so they cost the reader's group what one 32 KiB
// write cost the writer's. (At iodepth 1 both policies give the two equal
// bytes, 36% : 64% of what each gets alone: one 512 KiB read at a time uses
// the ssd's channels better than one 32 KiB write.)
TEST_CASE("weighted writes: cfq ssd, a reader of 512 KiB requests and a 32 KiB writer at 1:1") {
    reader_writer_case("cfq", "ssd", 512 * 1024, {4u});
    auto [reader, writer] = reader_writer_shares(reader_writer("cfq", "ssd", 4, 512 * 1024, "0"));
    CHECK(reader > 0.80);   // iops_charge_kb 0: the kernel's one per request
    CHECK(writer < 0.20);
}
TEST_CASE("weighted writes: bfq ssd, a reader of 512 KiB requests and a 32 KiB writer at 1:1") {
    reader_writer_case("bfq", "ssd", 512 * 1024, {4u});
}
TEST_CASE("weighted writes: bfq hdd, a reader and a writer at 1:1") { reader_writer_case("bfq", "hdd"); }

// Which writer starts first must not matter. bfq on flash lost the weights
// (exactly 1:1) when the light one started 1 ms before the heavy one: the
// heavier group preempted it, it left the scheduler, and at the heavier
// one's next completion nobody else seemed to wait, so neither idled. bfq
// on flash at qd1 keeps less than the 8:1 target here (bound 6:1).
TEST_CASE("weighted writes: the light writer starting first keeps the weights") {
    for (std::string policy : {"cfq", "bfq"})
        for (std::string profile : {"ssd", "hdd"})
            for (unsigned depth : {1u, 4u})
                for (Nanos head_start : {Nanos(1ms), Nanos(10ms)}) {
                    CAPTURE(policy);
                    CAPTURE(profile);
                    CAPTURE(depth);
                    Workload w = two_writers(policy, profile, depth, true);
                    w.jobs[0].start_delay = head_start;   // the heavy writer comes later
                    // A client's turn-around through the daemon (fio's nbd
                    // engine): with none, each request found the other
                    // group's queue just preempted and gone.
                    for (auto& j : w.jobs) j.think_time = 80us;
                    double ratio = group_ratio(run(w));
                    MESSAGE(policy << " " << profile << " qd" << depth << ", light writer first by "
                                   << format_duration(head_start) << ": " << ratio << ":1");
                    CHECK(ratio >= (policy == "bfq" && profile == "ssd" && depth == 1 ? 6.0 : k_min_share));
                }
}
