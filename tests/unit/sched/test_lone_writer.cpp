// One writer, or one reader, alone on a non-rotational device (the RAM
// device of bench target 4): cfq and bfq must not cost it anything next to
// `none`. No request waits in the scheduler, the client's whole queue depth
// reaches the device, and in virtual time it completes exactly as many
// requests as under `none` -- an idle or group-idle timer armed on the way,
// or a bfq budget running out (a 1 MiB read is 2048 sectors, a new queue's
// budget about 10,900), may never hold one of its requests back.
#include "test_cfq_rig.hpp"

using namespace cfqtest;

namespace {

constexpr unsigned depth = 64;   // the daemon's depth for a device without a timing profile

struct Case {
    const char* name;
    Op op;
    std::uint64_t block;
    bool sequential;
    int iodepth;
    Nanos latency;    // the device's service time (0: done at once, as RAM)
    Nanos think;      // client time between a reply and its next request
    Nanos duration;   // virtual time the writer runs
};

struct Outcome {
    JobResult result;
    unsigned max_depth = 0;
};

Outcome run(std::string_view policy, const Case& c) {
    std::string error;
    auto s = make_scheduler(policy, DeviceTraits{false, depth}, {}, error);
    REQUIRE_MESSAGE(s, error);
    Rig rig(std::move(s), fixed_latency(c.latency, depth), depth);
    JobSpec job;
    job.queue = 1;
    job.op = c.op;
    job.sync = true;   // reads, and writes with writes_sync (the daemon's default)
    job.block = c.block;
    job.sequential = c.sequential;
    job.iodepth = c.iodepth;
    job.think = c.think;
    const std::size_t j = rig.add_job(job);
    rig.run_until(Time(c.duration));
    rig.finish();
    return {rig.result(j), rig.max_seen_depth()};
}

}   // namespace

TEST_CASE("a lone writer or reader on flash or RAM: cfq and bfq dispatch every request at once, to full depth, as none") {
    const Case cases[] = {
        {"1 MiB sequential qd8, RAM", Op::write, 1u << 20, true, 8, Nanos{}, 150us, 300ms},
        {"1 MiB sequential qd8, 200us flash", Op::write, 1u << 20, true, 8, 200us, 20us, 300ms},
        {"4 KiB random qd64, RAM", Op::write, 4096, false, 64, Nanos{}, 100us, 100ms},
        {"4 KiB random qd64, 50us flash", Op::write, 4096, false, 64, 50us, 5us, 100ms},
        // A client slower than group_idle (8 ms) between requests: the timer fires.
        {"1 MiB sequential qd1, RAM, 10 ms think time", Op::write, 1u << 20, true, 1, Nanos{}, 10ms, 2s},
        // Experiment 6's 1 MiB reads (bfq 15-19% behind `none` there).
        {"1 MiB sequential read qd8, RAM", Op::read, 1u << 20, true, 8, Nanos{}, 150us, 300ms},
        {"1 MiB sequential read qd8, 200us flash", Op::read, 1u << 20, true, 8, 200us, 20us, 300ms},
        {"4 KiB random read qd64, RAM", Op::read, 4096, false, 64, Nanos{}, 100us, 100ms},
    };
    for (const Case& c : cases) {
        const std::string name = c.name;
        CAPTURE(name);
        const Outcome none = run("none", c);
        REQUIRE(none.result.completed > 0);
        for (const std::string policy : {"cfq", "bfq"}) {
            CAPTURE(policy);
            const Outcome o = run(policy, c);
            CHECK(o.result.max_wait == Nanos{});
            CHECK(o.result.completed == none.result.completed);
            // With a service time the whole client depth is at the device
            // (cfq: the only busy sync queue has no dispatch quantum).
            if (c.latency > Nanos{}) CHECK(o.max_depth == unsigned(c.iodepth));
        }
    }
}
