#include "daemon/process/event_loop.hpp"

#include <sys/resource.h>
#include <thread>
#include <time.h>

#include "daemon/process/busy_poll_policy.hpp"
#include "daemon/process/coalesce_policy.hpp"
#include "daemon/stats/loop_activity.hpp"

namespace nbdsched::daemon {
namespace {

// Involuntary context switches of this thread so far: the kernel took the
// CPU from it for another runnable thread.
long switched_out() {
    rusage usage{};
    return ::getrusage(RUSAGE_THREAD, &usage) == 0 ? usage.ru_nivcsw : 0;
}

// Polls `io` until a handler runs or `window` has passed; true if one ran.
bool poll_for_work(boost::asio::io_context& io, std::chrono::microseconds window, BusyPollPolicy& policy) {
    using clock = std::chrono::steady_clock;
    const long switches_before = policy.adaptive() ? switched_out() : 0;
    const auto start = clock::now();
    const auto deadline = start + window;
    auto polled_at = start;
    bool found = false;
    while (!io.stopped() && !found) {
        polled_at = clock::now();
        found = io.poll() != 0;
        if (clock::now() >= deadline) break;
    }
    // How long it polled before the call that found work (not the work).
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(polled_at - start);
    policy.polled(found, waited, policy.adaptive() && switched_out() != switches_before);
    return found;
}

// CPU time the calling thread has used.
std::chrono::steady_clock::duration thread_cpu_time() {
    timespec t{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec);
}

// Handlers `auto` lets run after a nap before it may nap again: more than
// a nap's work needs at iodepth 64 (naps paid in as many trials with the
// bound as without), so that only work that never runs dry is cut short.
constexpr std::size_t nap_drain_handlers = 32;

// Naps, then runs what came meanwhile (`auto`: at most nap_drain_handlers
// handlers of it, see run_ready); when nothing did, waits for work as usual
// (a nap after the last request of a burst finds none). False once `io` is
// out of work or stopped.
bool nap_then_run(boost::asio::io_context& io, std::chrono::microseconds nap, bool bounded, LoopStats& stats) {
    ++stats.naps;
    std::this_thread::sleep_for(nap);
    if ((bounded ? run_ready(io, nap_drain_handlers) : io.poll()) != 0) return true;
    ++stats.sleeps;
    return io.run_one() != 0;
}

}   // namespace

std::size_t run_ready(boost::asio::io_context& io, std::size_t most) {
    std::size_t ran = 0;
    while (ran < most && io.poll_one() != 0) ++ran;
    return ran;
}

LoopStats& LoopStats::operator+=(const LoopStats& other) {
    polls_with_work += other.polls_with_work;
    sleeps += other.sleeps;
    backoffs += other.backoffs;
    naps += other.naps;
    nap_trials += other.nap_trials;
    naps_kept += other.naps_kept;
    naps_lengthened += other.naps_lengthened;
    return *this;
}

void run_event_loop(boost::asio::io_context& io, const config::Limits& limits, LoopStats& stats) {
    if (limits.busy_poll.window.count() == 0 && limits.coalesce.window.count() == 0) {
        io.run();
        return;
    }
    BusyPollPolicy policy(limits.busy_poll);
    CoalescePolicy naps(limits.coalesce, thread_cpu_time);
    const bool polls = limits.busy_poll.window.count() != 0;
    const bool may_nap = limits.coalesce.window.count() != 0;   // else no clock reading per turn
    while (!io.stopped()) {
        if (may_nap) {
            if (const auto nap = naps.nap(std::chrono::steady_clock::now(), stats::loop_activity()); nap.count() != 0) {
                if (!nap_then_run(io, nap, limits.coalesce.adaptive, stats)) break;
                continue;
            }
        }
        if (!polls) {
            ++stats.sleeps;
            if (io.run_one() == 0) break;
            continue;
        }
        // While `auto` has stopped polling, a turn is one run_one(), as
        // io_context::run() has it: it runs what is ready and sleeps only
        // when nothing is. Asking the reactor first (poll()) cost an
        // epoll_wait with a zero timeout before every sleep: at 4k reads
        // at iodepth 64, about one in five of the daemon's system calls.
        if (policy.skip_turn()) {
            ++stats.sleeps;
            const auto before = stats::loop_activity().requests;
            if (io.run_one() == 0) break;
            policy.slept(stats::loop_activity().requests - before);
            continue;
        }
        if (io.poll() != 0) continue;   // run what is ready, until nothing is
        const auto window = policy.window();
        const bool found = window.count() != 0 && poll_for_work(io, window, policy);
        if (found) {
            ++stats.polls_with_work;
            continue;
        }
        ++stats.sleeps;
        if (io.run_one() == 0) break;   // out of work, or stopped
    }
    // Read at exit (the log line), so counted once here.
    stats.backoffs = policy.backoffs();
    stats.nap_trials = naps.trials();
    stats.naps_kept = naps.kept();
    stats.naps_lengthened = naps.lengthened();
}

}   // namespace nbdsched::daemon
