// How long an event loop polls for more work before it sleeps
// (`limits.busy_poll`). A fixed window polls after every burst of work.
// `auto` polls only while it pays: most polls find work within the window,
// and few are preempted -- a poll that the kernel switched out took the
// CPU from another runnable thread, on a machine whose cores are all busy
// most likely the very client it waits for (docs/data-path.md#busy-poll).
// When it does not pay, `auto` stops polling for a number of the loop's
// turns (skip_turn(): each a sleep at most) that doubles each time polling
// is tried again and still does not pay. What those turns gather tells a
// client that streams (a sleep gathers several of its requests) from one
// that waits for each reply (one request a turn), whose next request found
// at once still saved a sleep.
// Pure: the loop measures, this decides.
#pragma once

#include <chrono>
#include <cstdint>

#include "config/config.hpp"

namespace nbdsched::daemon {

class BusyPollPolicy {
public:
    using Micros = std::chrono::microseconds;
    // How many polls `auto` judges at a time, and how many sleeps it first
    // skips polling for when they did not pay (at most max_skip).
    static constexpr unsigned judged_polls = 16;
    static constexpr std::uint64_t first_skip = 16;
    static constexpr std::uint64_t max_skip = 4096;
    // Work found sooner than this saved no sleep worth saving: the client
    // is streaming requests (a deep queue), and a loop that sleeps instead
    // gathers them into larger batches, with fewer system calls per request
    // on both sides (4k reads at iodepth 64 on a quiet host: polling cost
    // 9-12% of the IOPS and half again the CPU per request).
    static constexpr Micros min_saved_wait{5};
    // ... unless sleeping gathers no more than this many requests a turn
    // (in tenths; the turns that gathered any): a client at queue depth 1
    // that answers within 5 µs, which a sleep would only delay
    // (nbdsched-load's 4k reads at qd1 over Unix: 25.3k IOPS with the rule
    // alone, 31.8k with this exception; docs/data-path.md).
    static constexpr std::uint64_t streaming_tenths = 15;
    // Paying judgements after which `auto`, polling for such a client,
    // pauses as after a failure to check that sleeping still gathers one
    // request a turn (the client may have begun streaming).
    static constexpr unsigned recheck_judgements = 64;

    explicit BusyPollPolicy(const config::LoopWindow& settings) : settings_(settings) {}

    bool adaptive() const { return settings_.adaptive; }
    // The loop ran out of work: how long to poll now (0: sleep at once).
    Micros window();
    // True while `auto` has stopped polling, counting one turn of the loop
    // toward the pause: the loop then runs its handlers without looking for
    // work first, sleeping when it has none. A turn runs one handler, and
    // sleeps at most once: the pause counts turns as sleeps.
    bool skip_turn() {
        if (skip_ == 0) return false;
        --skip_;
        return true;
    }
    // What a turn while paused gathered: the requests the loop's
    // connections submitted in it.
    void slept(std::uint64_t requests) {
        if (requests == 0) return;
        ++pause_turns_;
        pause_requests_ += requests;
    }
    // The last pause saw a streaming client (or none has shown otherwise).
    bool sleeps_gather() const { return sleeps_gather_; }
    // What that poll came to: work found within the window or not (and
    // after how long), and whether the thread was switched out while it
    // polled.
    void polled(bool found_work, Micros waited, bool preempted);
    // Times `auto` stopped polling because it did not pay.
    std::uint64_t backoffs() const { return backoffs_; }

private:
    void back_off();
    void conclude_pause();

    config::LoopWindow settings_;
    unsigned judged_ = 0;      // polls since the last judgement
    unsigned found_ = 0;       // of them, those that found work
    unsigned preempted_ = 0;   // ... and those switched out while polling
    std::uint64_t skip_ = 0;   // sleeps left without polling
    std::uint64_t next_skip_ = first_skip;
    std::uint64_t backoffs_ = 0;
    bool sleeps_gather_ = true;          // until a pause shows one request a turn
    std::uint64_t pause_turns_ = 0;      // turns of this pause that gathered requests
    std::uint64_t pause_requests_ = 0;   // ... and how many
    unsigned kept_ = 0;                  // paying judgements since the last check
};

}   // namespace nbdsched::daemon
