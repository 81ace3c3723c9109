// CFQ under random (but deterministic) loads, devices, tunable changes,
// re-weighting and clients going away: nothing lost, nothing stuck, the
// depth limit holds (the rig checks every dispatch and completion).
#include "test_cfq_rig.hpp"

#include <string>

using namespace cfqtest;

namespace {

struct Lcg {
    std::uint64_t s;
    std::uint64_t next(std::uint64_t n) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        return (s >> 33) % n;
    }
};

}   // namespace

TEST_CASE("cfq fuzz: random loads, run-time changes and closed queues") {
    for (std::uint64_t seed = 1; seed <= 16; ++seed) {
        CAPTURE(seed);
        Lcg r{seed};
        const bool rotational = r.next(2) == 0;
        const unsigned depth = unsigned(1 + r.next(32));
        FakeDevice dev = rotational ? simple_disk() : fixed_latency(Nanos(50'000 + r.next(500'000)), 1 + unsigned(r.next(16)));
        Rig rig(make_cfq_sched(rotational, depth), dev, depth);
        const GroupId groups = GroupId(1 + r.next(3));
        for (GroupId g = 0; g < groups; ++g) rig.sched().set_group(g, unsigned(1 + r.next(1000)));
        const unsigned jobs = unsigned(2 + r.next(7));
        for (unsigned j = 0; j < jobs; ++j) {
            JobSpec spec;
            spec.queue = j + 1;
            spec.group = GroupId(r.next(groups));
            spec.op = r.next(2) ? Op::read : Op::write;
            spec.sync = spec.op == Op::read || r.next(2);
            spec.sequential = r.next(2);
            spec.block = 4096u << r.next(5);
            spec.region = r.next(64) << 30;
            spec.region_size = 1ull << 30;
            spec.iodepth = int(1 + r.next(16));
            spec.think = Nanos(r.next(3) ? 0 : r.next(3'000'000));
            rig.add_job(spec);
        }
        static const char* const idles[] = {"0", "2ms", "8ms", "auto"};
        for (int chunk = 1; chunk <= 10; ++chunk) {
            rig.run_until(Time(chunk * 200ms));
            const Time now = rig.now();
            switch (r.next(6)) {
            case 0: CHECK(rig.sched().set_tunable("slice_idle", idles[r.next(4)], now).empty()); break;
            case 1: CHECK(rig.sched().set_tunable("group_idle", idles[r.next(3)], now).empty()); break;
            case 2: CHECK(rig.sched().set_tunable("quantum", std::to_string(1 + r.next(8)), now).empty()); break;
            case 3: CHECK(rig.sched().set_tunable("low_latency", r.next(2) ? "1" : "0", now).empty()); break;
            case 4: rig.sched().set_group(GroupId(r.next(groups)), unsigned(1 + r.next(1000))); break;
            default: rig.sched().close_queue(QueueId(1 + r.next(jobs)), now); break;
            }
        }
        CHECK(rig.submitted() > 100);
        rig.finish();
        auto st = rig.sched().stats(rig.now());
        CHECK(st.device.completed == rig.submitted());
        CHECK_FALSE(st.idling);
    }
}
