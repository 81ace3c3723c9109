// nbdsched-sched-bench: CPU cost of one request's trip through a scheduler
// (submit + dispatch + complete, thread CPU time) with 1, 100 and 10,000 queues
// by default. A micro-benchmark, not a test: numbers depend on the machine and
// its load (valgrind --tool=callgrind gives steady instruction counts).
//   nbdsched-sched-bench [--requests N] [--policy P]... [--queues N]... [--groups N]
//                        [--pattern P] [--batch N] [--rotational] [--set k=v]...
// A --set tunable applies to the policies that have it (the others say they
// ignore it); one that no measured policy has is an error.
// Exit status: 0 every cell measured; 1 a cell failed (its row says why);
// 2 a bad command line.
// Patterns: "backlog" keeps every queue backlogged and a device of depth 32
// busy; "inline" is the daemon on a RAM device (bench experiment 7): requests
// arrive one at a time from random connections, each with up to 8 outstanding,
// and every dispatched request completes at once, before the next arrives
// (--batch N: N arrive, as from one read of a socket, before dispatch is asked).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <deque>
#include <optional>
#include <vector>

#include "sched/scheduler.hpp"
#include "tools/sim/assignments.hpp"

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
    // How often next_wakeup() changed: each change makes the daemon re-arm
    // (or cancel) its Asio timer, a cost outside the scheduler.
    std::uint64_t timer_changes = 0;
};

// Counts changes of next_wakeup() between driver events.
struct TimerWatch {
    std::optional<sched::Time> last;
    std::uint64_t changes = 0;
    void check(const sched::Scheduler& s) {
        auto next = s.next_wakeup();
        if (next != last) ++changes;
        last = next;
    }
};

// Deterministic pseudo-random numbers (an LCG), so runs are comparable.
struct Lcg {
    std::uint64_t x = 12345;
    std::uint64_t next() {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        return x >> 20;
    }
};

// Queue q is in group q % groups + 1; group g weighs 100 * g. Set once, by
// main from --groups.
unsigned groups = 4;

sched::GroupId group_of(sched::QueueId q) { return sched::GroupId(q % groups + 1); }

void open_queues(sched::Scheduler& s, unsigned queues, sched::Time now) {
    for (sched::GroupId g = 1; g <= groups; ++g) s.set_group(g, 100 * g);
    for (unsigned q = 0; q < queues; ++q) s.open_queue(q, group_of(q), now);
}

sched::Request make_request(sched::QueueId q, std::uint64_t id, Lcg& rng, sched::Time now) {
    sched::Request r;
    r.id = id;
    r.queue = q;
    r.group = group_of(q);
    r.offset = rng.next() % (1ull << 30) * 4096;
    r.length = 4096;
    r.arrival = now;
    return r;
}

// Keeps every queue backlogged (2 requests each, at least 64 in all) and the
// device full (depth 32); each completion submits a new request on its queue.
Outcome measure_backlog(sched::Scheduler& s, unsigned queues, std::uint64_t requests,
                        std::string& error) {
    sched::Time now{};
    std::uint64_t next_id = 1;
    Lcg rng;
    auto submit = [&](sched::QueueId q) { s.submit(make_request(q, next_id++, rng, now), now); };
    open_queues(s, queues, now);
    unsigned per_queue = std::max(2u, 64 / queues);
    for (unsigned k = 0; k < per_queue; ++k)
        for (unsigned q = 0; q < queues; ++q) submit(q);

    std::deque<sched::Request> in_flight;
    std::uint64_t done = 0, stalls = 0;
    TimerWatch timer;
    std::int64_t start = cpu_ns();
    while (done < requests) {
        while (auto r = s.dispatch(now)) in_flight.push_back(*r);
        timer.check(s);
        if (in_flight.empty()) {
            // Idling: jump the virtual clock to the scheduler's timer.
            auto wake = s.next_wakeup();
            now = wake && *wake > now ? *wake : now + Nanos(1000);
            if (++stalls > requests) {
                error = "scheduler stalls";
                return {};
            }
            continue;
        }
        sched::Request r = in_flight.front();
        in_flight.pop_front();
        now += Nanos(1000);
        s.complete(r.id, now);
        submit(r.queue);
        ++done;
    }
    return {double(cpu_ns() - start) / double(done), done, timer.changes};
}

// The daemon's pattern on a RAM device: a request from a random connection
// that has fewer than 8 outstanding arrives every 2 us; the device loop drains
// dispatch() after every `batch` arrivals (the requests one read of a socket
// brought) and every dispatched request completes inline.
Outcome measure_inline(sched::Scheduler& s, unsigned queues, unsigned batch, std::uint64_t requests,
                       std::string& error) {
    const unsigned kIodepth = std::max(8u, batch);
    sched::Time now{};
    std::uint64_t next_id = 1, done = 0, stalls = 0, arrived = 0;
    Lcg rng;
    open_queues(s, queues, now);
    std::vector<unsigned> outstanding(queues, 0);
    std::vector<sched::QueueId> of_id;   // queue of each request id, to give its slot back
    of_id.reserve(requests + queues * kIodepth + 1);
    of_id.push_back(0);
    TimerWatch timer;
    auto drain = [&] {
        while (auto r = s.dispatch(now)) {
            s.complete(r->id, now);
            --outstanding[of_id[r->id]];
            ++done;
        }
        timer.check(s);
    };
    std::int64_t start = cpu_ns();
    while (done < requests) {
        auto q = sched::QueueId(rng.next() % queues);
        if (outstanding[q] >= kIodepth) {
            // All of this connection's requests are held (idling for another
            // queue): time passes until the scheduler's timer.
            auto wake = s.next_wakeup();
            now = wake && *wake > now ? *wake : now + Nanos(2000);
            drain();
            if (++stalls > 100 * requests) {
                error = "scheduler stalls";
                return {};
            }
            continue;
        }
        now += Nanos(2000);
        ++outstanding[q];
        of_id.push_back(q);
        s.submit(make_request(q, next_id++, rng, now), now);
        if (++arrived % batch == 0) drain();
    }
    return {double(cpu_ns() - start) / double(done), done, timer.changes};
}

// The tunables this policy has; the others are reported once and left out.
sched::Tunables own_tunables(const std::string& policy, const sched::Tunables& all) {
    auto names = sched::tunable_names(policy);
    sched::Tunables own;
    for (const auto& [name, value] : all) {
        if (std::find(names.begin(), names.end(), name) != names.end()) own[name] = value;
        else if (!names.empty()) std::fprintf(stderr, "%s ignores %s\n", policy.c_str(), name.c_str());   // empty: unknown policy, its row says so
    }
    return own;
}

}   // namespace

int main(int argc, char** argv) {
    CLI::App app{"scheduler dispatch cost micro-benchmark"};
    std::uint64_t requests = 300000;
    std::vector<std::string> policies{"none", "cfq", "bfq"}, sets;
    std::vector<unsigned> queue_counts{1, 100, 10000};
    std::string pattern = "backlog";
    unsigned batch = 1;
    bool rotational = false;
    app.add_option("--requests", requests, "requests per measurement")
        ->check(CLI::Range(std::uint64_t{1}, std::uint64_t{1'000'000'000}));
    app.add_option("--queues", queue_counts, "queue counts to measure (repeatable)")
        ->check(CLI::Range(1u, 1000000u));
    app.add_option("--groups", groups, "groups the queues are spread over (weights 100, 200, ...)")
        ->check(CLI::Range(1u, 10u));
    app.add_option("--pattern", pattern, "backlog (device of depth 32 kept busy) or inline (RAM: completes at once)")
        ->check(CLI::IsMember({"backlog", "inline"}));
    app.add_option("--batch", batch, "inline: arrivals between two drains of dispatch()")
        ->check(CLI::Range(1u, 1024u));
    app.add_option("--policy", policies, "policies to measure");
    app.add_flag("--rotational", rotational, "present a rotational device (idling on by default)");
    app.add_option("--set", sets, "tunable name=value (repeatable)");
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? 0 : 2;
    }

    if (batch != 1 && pattern != "inline") {
        std::fprintf(stderr, "--batch applies to --pattern inline only\n");
        return 2;
    }
    sched::Tunables tunables;
    if (auto bad = sim::add_assignments(sets, tunables); !bad.empty()) {
        std::fprintf(stderr, "--set wants name=value, got '%s'\n", bad.c_str());
        return 2;
    }
    for (const auto& entry : tunables) {
        const std::string& name = entry.first;   // clang 14 cannot capture a structured binding
        bool known = std::any_of(policies.begin(), policies.end(), [&](const std::string& p) {
            auto names = sched::tunable_names(p);
            return std::find(names.begin(), names.end(), name) != names.end();
        });
        if (!known) {
            std::fprintf(stderr, "--set %s: no policy measured here has this tunable\n", name.c_str());
            return 2;
        }
    }
    std::printf("%-6s %8s %12s %10s %14s\n", "policy", "queues", "ns/request", "requests",
                "timer-changes");
    int status = 0;
    for (const auto& policy : policies) {
        sched::Tunables own = own_tunables(policy, tunables);
        for (unsigned queues : queue_counts) {
            std::string error;
            auto s = sched::make_scheduler(policy, sched::DeviceTraits{rotational, 32}, own, error);
            if (!s) {
                std::printf("%-6s %8u %12s  (%s)\n", policy.c_str(), queues, "-", error.c_str());
                status = 1;
                break;
            }
            Outcome o = pattern == "inline" ? measure_inline(*s, queues, batch, requests, error)
                                            : measure_backlog(*s, queues, requests, error);
            if (!error.empty()) {
                std::printf("%-6s %8u %12s  (%s)\n", policy.c_str(), queues, "-", error.c_str());
                status = 1;
                continue;
            }
            std::printf("%-6s %8u %12.0f %10llu %14llu\n", policy.c_str(), queues, o.ns_per_request,
                        static_cast<unsigned long long>(o.requests),
                        static_cast<unsigned long long>(o.timer_changes));
        }
    }
    return status;
}
