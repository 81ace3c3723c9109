// When a loop-driven engine (file_uring.hpp) hands the requests it holds to
// the kernel. Why not at once: a disk that completes its queue in passes
// (Firecracker's virtio-blk: the device pops every request in its ring, runs
// them, then raises one interrupt for all) keeps every request of a pass
// together, so with one client the whole queue depth moves in lockstep and
// the disk stands idle while the daemon and the client turn the replies
// round. Requests that arrive while a pass runs would join it; held back
// until its completions, they form a second cohort that the disk runs while
// the first one travels (docs/file-backend-io.md, "Cohorts").
#pragma once

#include <cstddef>
#include <cstdint>

namespace nbdsched::backend {

// Cohorts pay only where the disk completes in passes: on a device that
// completes requests one by one (a loop device over tmpfs, whose work runs on
// the host's own CPUs) holding requests back only costs loop turns and system
// calls (qd64: 70k against 88k IOPS). How long a request stays in the kernel
// does not tell the two apart (the loop device's requests stayed 300 us,
// waiting for the busy daemon to reap them; the disk's own latency in
// /sys/block/DEV/stat was 430 us on it against 770 us on the slow disk).
// What does: the share of the requests in the kernel that one signal of the
// ring's eventfd completes. A disk that runs passes completes them all with
// one interrupt, so one task-work run in the daemon posts them all and
// signals once; one by one, each signal brings a few. Cohorts are on while
// that share is at least k_on_share, off again below k_off_share (in
// 1/k_share_one); until then every request goes at once, as before.
class SubmissionCohorts {
public:
    static constexpr std::uint32_t k_share_one = 1024;
    static constexpr std::uint32_t k_on_share = k_share_one * 5 / 8;
    static constexpr std::uint32_t k_off_share = k_share_one * 3 / 8;
    // Below this many requests in the kernel nothing waits: at a low queue
    // depth the turnaround, not the disk, sets the pace, and holding a
    // request behind one or two others would only serialise them.
    static constexpr std::size_t k_min_in_kernel = 8;
    // A cohort goes into the kernel this many entries per io_uring_enter:
    // the block layer plugs what one call submits and starts the disk at the
    // end of the call (32 reads took 75 us on the test VM), so smaller calls
    // let the disk begin on the first entries while the rest are submitted.
    static constexpr std::size_t k_chunk = 8;

    // At the end of a loop turn: how many of the `waiting` requests join the
    // `in_kernel` ones (submitted, completions not reaped): up to half of
    // the most the engine has held lately (at least k_min_in_kernel), so
    // that a burst at an idle disk makes two cohorts and the requests that
    // arrive while a deep queue runs wait for its completions.
    std::size_t admit(std::size_t in_kernel, std::size_t waiting) const;
    // Completions are ready, `done` of the `in_kernel`: how many of the
    // `waiting` go in now, before those completions are reported. A disk
    // that finished (nearly) all it had gets the next cohort, topped up to
    // half the queue depth so that the two cohorts stay even; one that still
    // holds that many (it completes requests one by one) gets every waiting
    // request, so that it keeps its queue depth.
    std::size_t at_completions(std::size_t in_kernel, std::size_t done, std::size_t waiting);
    // A reap found `done` completions of the `in_kernel` requests, brought
    // by `signals` signals of the ring's eventfd (0: not known, ignored).
    // Below k_min_in_kernel requests the share says nothing (one of one is
    // all), and the rule holds nothing back there anyway. A moving average
    // of 1/32 a reap decides on(): on the loop device a quarter of the reaps
    // still found everything done by one signal (the daemon's thread, busy
    // or waiting for a CPU, ran the kernel's task work late), the average
    // stayed near 0.35 there and near 0.9 on the slow disk.
    void reaped(std::size_t in_kernel, std::size_t done, std::uint64_t signals);
    // The moving average, in 1/k_share_one (tests, debugging).
    std::uint32_t share() const { return share_; }
    // Cohorts are on: the disk runs passes, and they are not held off.
    bool on() const { return on_ && !held_off_; }
    // The disk runs passes (the share says so), held off or not.
    bool passes() const { return on_; }
    // Held off: without cohorts these clients were served faster
    // (cohort_trials.hpp).
    void hold_off(bool off) { held_off_ = off; }
    // Entries per io_uring_enter: k_chunk while on, else all at once.
    std::size_t chunk() const { return on() ? k_chunk : static_cast<std::size_t>(-1); }

private:
    std::size_t cap(std::size_t held) const;
    // The most requests the engine held at once lately (in the kernel and
    // waiting): the client's queue depth, as far as the engine can see it.
    // It decays by 1/64 (at least 1) at each reap, so that a client that
    // goes shallower is followed.
    std::size_t peak_ = 0;
    std::uint32_t share_ = 0;
    bool on_ = false;
    bool held_off_ = false;
};

}   // namespace nbdsched::backend
