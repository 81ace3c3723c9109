// The optional asynchronous submission path of a backend (RBD, a file on
// io_uring): a request is started and the call returns at once; the backend
// reports its end to a CompletionSink. The daemon then needs no thread per
// request in flight, so a deep queue is not capped by its pool's size.
// The synchronous Backend calls stay available (metadata, shutdown flush).
//
// Two kinds: RBD completes from threads of its own (CompletionSink::
// completed). A loop-driven backend (io_uring) has a completion_fd() that the
// event loop watches; the loop calls reap(), which reports on the loop thread
// (completed_on_loop), and submit_pending() once per turn, so that a burst of
// submissions costs few system calls (the io_uring engine hands requests to
// the kernel in cohorts, submission_cohorts.hpp). Such a backend is called
// from one thread only and needs no lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace nbdsched::backend {

class CompletionSink {
public:
    // `tag` as given to the submit call; `error` 0 or an errno. Called once
    // per request, from a backend thread (or from inside the submit call when
    // the request could not be started): the sink must be thread-safe and
    // must not call back into the backend.
    virtual void completed(void* tag, int error) = 0;
    // The same from a loop-driven backend's reap() or submit call, on the
    // event loop thread: the sink may finish the request at once, and may
    // submit new requests from inside it.
    virtual void completed_on_loop(void* tag, int error) { completed(tag, error); }

protected:
    ~CompletionSink() = default;
};

enum class AsyncOp { read,
                     write,
                     flush,
                     trim,
                     write_zeroes };

// What a loop-driven engine's cohorts (submission_cohorts.hpp,
// cohort_trials.hpp) are doing, for stats.
struct CohortStats {
    bool passes = false;          // the disk completes its queue in passes
    bool on = false;              // requests go to the kernel in cohorts now
    std::uint64_t trials = 0;     // trials with and without cohorts, finished
    std::uint64_t held_off = 0;   // ... that held them off: the clients were served faster without
};

class AsyncBackend {
public:
    virtual ~AsyncBackend() = default;

    // Set once, before the first submit; it must outlive every request.
    virtual void set_sink(CompletionSink* sink) = 0;
    // false: this request runs better as the synchronous call on the daemon's
    // thread pool (io_uring: an unaligned O_DIRECT request, a fallocate).
    virtual bool takes(AsyncOp op, std::uint64_t offset, std::uint64_t length, const void* buffer) const {
        (void)op, (void)offset, (void)length, (void)buffer;
        return true;
    }
    // Buffers stay the caller's and must live until the completion.
    virtual void submit_read(std::uint64_t offset, std::span<std::byte> out, void* tag) = 0;
    virtual void submit_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, void* tag) = 0;
    virtual void submit_flush(void* tag) = 0;
    virtual void submit_trim(std::uint64_t offset, std::uint64_t length, bool fua, void* tag) = 0;
    virtual void submit_write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua,
                                     void* tag) = 0;

    // Loop-driven backends only (see above); -1: completions come from the
    // backend's own threads.
    virtual int completion_fd() const { return -1; }
    // Reports every finished request to the sink (which may queue more:
    // pending() then says so, as after a submit_* call). `signals`: how
    // many times completion_fd() was signalled since the last reap (its
    // eventfd counter; 0 when not known).
    virtual void reap(std::uint64_t signals) { (void)signals; }
    // Requests queued by submit_* and not yet handed to the kernel.
    virtual bool pending() const { return false; }
    virtual void submit_pending() {}
    // An engine that may send requests in cohorts: what they are doing;
    // nullopt for any other (or with io_cohorts: off, or without O_DIRECT).
    virtual std::optional<CohortStats> cohort_stats() const { return std::nullopt; }
};

}   // namespace nbdsched::backend
