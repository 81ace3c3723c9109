// The file backend's io_uring engine (io_engine: io_uring): reads, writes
// (FUA as RWF_DSYNC on the write) and flushes (fsync DATASYNC) go to one ring
// owned by the device's event loop, driven as async_backend.hpp describes:
// the loop submits once per turn and reaps when the ring's eventfd fires.
// What the ring does not do well here stays on the daemon's thread pool
// through takes(): unaligned O_DIRECT (read-modify-write under the block
// locks), buffered requests over FileBackend::kCachedReadMax (their copy)
// and TRIM / WRITE_ZEROES (fallocate). Short transfers are resubmitted
// for the rest; a read past the end of the file reads zeros, as pread_full.
// An O_DIRECT write holds its bytes in the file's BlockGuard from submission
// to completion; while a read-modify-write of one of its blocks runs on the
// pool it waits in the engine (parked, not in the ring), and the end of that
// read-modify-write wakes the loop through the eventfd to start it.
// A request that finds the submission queue full while the kernel takes
// nothing from it (io_uring_enter refused: EAGAIN, ENOMEM, EBUSY) waits in
// the engine, in order, and goes in at the next completion or loop turn.
// While the disk completes its requests in passes (one eventfd signal brings
// most of those in the kernel), they go to the kernel in cohorts
// (submission_cohorts.hpp): at the end of a loop turn as many as
// SubmissionCohorts::admit() lets in; the next cohort when completions are
// reaped, before those are reported; k_chunk entries per system call.
// Unless a trial found these clients served faster without them
// (cohort_trials.hpp).
// docs/file-backend-io.md has the design and the measurements.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backend/async_backend.hpp"
#include "backend/cohort_trials.hpp"
#include "backend/submission_cohorts.hpp"
#include "common/reused_fifo.hpp"

struct io_uring;

namespace nbdsched::backend {

class FileBackend;

class FileUring final : public AsyncBackend {
public:
    // Submission queue entries; the completion queue holds kCompletions, the
    // deepest device queue (queue_depth) there can be, so it cannot overflow.
    static constexpr unsigned kEntries = 256;
    static constexpr unsigned kCompletions = 4096;

    // nullptr and why in `error` when the kernel refuses a ring (old kernel,
    // seccomp, io_uring_disabled) or its eventfd.
    static std::unique_ptr<FileUring> open(FileBackend& file, std::string& error);
    // Waits for the requests in flight (their buffers are the caller's); the
    // sink hears nothing more.
    ~FileUring() override;
    FileUring(const FileUring&) = delete;
    FileUring& operator=(const FileUring&) = delete;

    void set_sink(CompletionSink* sink) override { sink_ = sink; }
    bool takes(AsyncOp op, std::uint64_t offset, std::uint64_t length, const void* buffer) const override;
    void submit_read(std::uint64_t offset, std::span<std::byte> out, void* tag) override;
    void submit_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, void* tag) override;
    void submit_flush(void* tag) override;
    // Not taken (takes() is false): run synchronously when called anyway.
    void submit_trim(std::uint64_t offset, std::uint64_t length, bool fua, void* tag) override;
    void submit_write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua, void* tag) override;

    int completion_fd() const override { return event_fd_; }
    void reap(std::uint64_t signals) override;
    bool pending() const override;
    void submit_pending() override;
    std::optional<CohortStats> cohort_stats() const override;

    // Requests started and not reported yet (tests).
    std::size_t in_flight() const { return ops_.size() - free_.size(); }
    // O_DIRECT writes waiting for a read-modify-write of their blocks (tests).
    std::size_t parked() const { return parked_.size(); }
    // Requests started and not yet in the kernel: held back for the next
    // cohort, or no room in the submission queue (tests).
    std::size_t waiting() const { return unsent_.size() + queued_; }
    // Requests handed to the kernel whose completions are not reaped (tests).
    std::size_t in_kernel() const { return in_kernel_; }
    // When requests go to the kernel (tests: a slow disk can be made up).
    SubmissionCohorts& cohorts() { return cohorts_; }

private:
    struct Op;
    explicit FileUring(FileBackend& file);
    Op& new_op(void* tag, AsyncOp kind, std::byte* data, std::size_t length, std::uint64_t offset);
    void start(Op& op);                     // a place in unsent_, for what is left of op
    bool prepare(Op& op);                   // false: no room in the submission queue, even after submitting
    void submit_unsent(std::size_t most);   // the first `most` of unsent_, k_chunk per system call
    void submit_queued();
    bool hold(Op& op);   // takes op's bytes in the guard (O_DIRECT writes); false: parked
    void start_parked();
    void on_result(Op& op, int res);
    void finish(Op& op, int error);
    void release(Op& op);
    void drain_for_exit();
    // io_cohorts: auto, and O_DIRECT: only O_DIRECT requests meet the disk's
    // passes; a buffered one is a copy to or from the page cache, often done
    // inside io_uring_enter, which would look like a pass (all done at one signal).
    bool cohorts_allowed() const;

    FileBackend& file_;
    std::unique_ptr<::io_uring> ring_;
    int event_fd_ = -1;
    CompletionSink* sink_ = nullptr;
    unsigned queued_ = 0;         // SQEs filled and not yet submitted
    std::size_t in_kernel_ = 0;   // submitted, completion not reaped yet
    SubmissionCohorts cohorts_;
    CohortTrials trials_;                    // whether cohorts pay with these clients
    std::vector<std::unique_ptr<Op>> ops_;   // every Op ever made, reused through free_
    std::vector<Op*> free_;
    std::vector<Op*> parked_;          // O_DIRECT writes waiting for the guard
    common::ReusedFifo<Op*> unsent_;   // waiting for their cohort or for room in the submission queue, oldest first
};

}   // namespace nbdsched::backend
