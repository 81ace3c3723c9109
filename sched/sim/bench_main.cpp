// nbdsched-sched-bench: wall-clock cost of one request's trip through a
// scheduler (submit + dispatch + complete, thread CPU time) with 1, 100 and 10,000 busy queues.
// A micro-benchmark, not a test: numbers depend on the machine and its load.
//   nbdsched-sched-bench [--requests N] [--policy P]... [--rotational] [--set k=v]...
#include <CLI/CLI.hpp>

#include <cstdio>
#include <ctime>
#include <deque>

#include "sched/scheduler.hpp"
#include "sched/sim/assignments.hpp"

namespace {

using namespace nbdsched;

// CPU time of this thread: the machine is shared, wall time would measure
// the neighbours' builds as much as the scheduler.
std::int64_t cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return std::int64_t(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Outcome {
    double ns_per_request = 0;
    std::uint64_t requests = 0;
};

// Keeps every queue backlogged (2 requests each, at least 64 in all) and the
// device full (depth 32); each completion submits a new request on its queue.
Outcome measure(sched::Scheduler& s, unsigned queues, std::uint64_t requests, std::string& error) {
    sched::Time now{};
    std::uint64_t next_id = 1, x = 12345;
    auto submit = [&](sched::QueueId q) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        sched::Request r;
        r.id = next_id++;
        r.queue = q;
        r.group = sched::GroupId(q % 4 + 1);
        r.offset = (x >> 20) % (1ull << 30) * 4096;
        r.length = 4096;
        r.arrival = now;
        s.submit(r, now);
    };
    for (sched::GroupId g = 1; g <= 4; ++g) s.set_group(g, 100 * g);
    for (unsigned q = 0; q < queues; ++q) s.open_queue(q, sched::GroupId(q % 4 + 1), now);
    unsigned per_queue = std::max(2u, 64 / queues);
    for (unsigned k = 0; k < per_queue; ++k)
        for (unsigned q = 0; q < queues; ++q) submit(q);

    std::deque<sched::Request> in_flight;
    std::uint64_t done = 0, stalls = 0;
    std::int64_t start = cpu_ns();
    while (done < requests) {
        while (auto r = s.dispatch(now)) in_flight.push_back(*r);
        if (in_flight.empty()) {
            // Idling: jump the virtual clock to the scheduler's timer.
            auto wake = s.next_wakeup();
            now = wake && *wake > now ? *wake : now + Nanos(1000);
            if (++stalls > requests) { error = "scheduler stalls"; return {}; }
            continue;
        }
        sched::Request r = in_flight.front();
        in_flight.pop_front();
        now += Nanos(1000);
        s.complete(r.id, now);
        submit(r.queue);
        ++done;
    }
    return {double(cpu_ns() - start) / double(done), done};
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"scheduler dispatch cost micro-benchmark"};
    std::uint64_t requests = 300000;
    std::vector<std::string> policies{"none", "cfq", "bfq"}, sets;
    bool rotational = false;
    app.add_option("--requests", requests, "requests per measurement");
    app.add_option("--policy", policies, "policies to measure");
    app.add_flag("--rotational", rotational, "present a rotational device (idling on by default)");
    app.add_option("--set", sets, "tunable name=value (repeatable)");
    CLI11_PARSE(app, argc, argv);

    sched::Tunables tunables;
    if (auto bad = sim::add_assignments(sets, tunables); !bad.empty()) {
        std::fprintf(stderr, "--set wants name=value, got '%s'\n", bad.c_str());
        return 2;
    }
    std::printf("%-6s %8s %12s %10s\n", "policy", "queues", "ns/request", "requests");
    int status = 0;
    for (const auto& policy : policies) {
        for (unsigned queues : {1u, 100u, 10000u}) {
            std::string error;
            auto s = sched::make_scheduler(policy, sched::DeviceTraits{rotational, 32}, tunables, error);
            if (!s) {
                std::printf("%-6s %8u %12s  (%s)\n", policy.c_str(), queues, "-", error.c_str());
                break;
            }
            Outcome o = measure(*s, queues, requests, error);
            if (!error.empty()) {
                std::printf("%-6s %8u %12s  (%s)\n", policy.c_str(), queues, "-", error.c_str());
                status = 1;
                continue;
            }
            std::printf("%-6s %8u %12.0f %10llu\n", policy.c_str(), queues, o.ns_per_request,
                        static_cast<unsigned long long>(o.requests));
        }
    }
    return status;
}
