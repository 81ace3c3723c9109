#include "backend/file_uring.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <liburing.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend/file_backend.hpp"

namespace nbdsched::backend {

namespace {

// A request the kernel keeps answering EAGAIN or EINTR fails with it after
// this many tries rather than looping for ever.
constexpr unsigned max_retries = 1000;

// Reaped a batch at a time: no allocation, and a sink that submits (or
// resubmits the rest of a short transfer) never meets a half-walked queue.
constexpr unsigned reap_batch = 64;

}   // namespace

struct FileUring::Op {
    void* tag = nullptr;
    AsyncOp kind = AsyncOp::read;
    std::byte* data = nullptr;
    std::size_t length = 0;
    std::uint64_t offset = 0;
    std::size_t done = 0;
    bool fua = false;
    bool sync_after = false;   // RWF_DSYNC refused: a plain write, then fdatasync
    bool syncing = false;      // that fdatasync is what is in flight
    unsigned retries = 0;
    BlockGuard::Hold hold;   // an O_DIRECT write's bytes, until its completion
};

FileUring::FileUring(FileBackend& file) : file_(file), ring_(std::make_unique<::io_uring>()) {}

std::unique_ptr<FileUring> FileUring::open(FileBackend& file, std::string& error) {
    std::unique_ptr<FileUring> u(new FileUring(file));
    ::io_uring_params params{};
    params.flags = IORING_SETUP_CQSIZE;
    params.cq_entries = kCompletions;
    int rc = ::io_uring_queue_init_params(kEntries, u->ring_.get(), &params);
    if (rc < 0) {
        error = std::string("io_uring_queue_init: ") + std::strerror(-rc);
        u->ring_.reset();
        return nullptr;
    }
    u->event_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (u->event_fd_ < 0) {
        error = std::string("eventfd: ") + std::strerror(errno);
        return nullptr;
    }
    if ((rc = ::io_uring_register_eventfd(u->ring_.get(), u->event_fd_)) < 0) {
        error = std::string("io_uring_register_eventfd: ") + std::strerror(-rc);
        return nullptr;
    }
    if (file.direct()) {
        // A parked write may start once a read-modify-write is done: the loop
        // hears it as a completion (reap() starts the parked writes first).
        file.guard().set_waker([fd = u->event_fd_] { ::eventfd_write(fd, 1); });
    }
    return u;
}

FileUring::~FileUring() {
    if (!ring_) return;
    if (file_.direct()) file_.guard().set_waker(nullptr);
    for (Op* op : parked_) release(*op);   // never started: nothing to wait for
    parked_.clear();
    for (Op* op : unsent_) release(*op);   // not in the kernel either
    unsent_.clear();
    drain_for_exit();
    ::io_uring_queue_exit(ring_.get());
    if (event_fd_ >= 0) ::close(event_fd_);
}

void FileUring::drain_for_exit() {
    while (in_flight() != 0) {
        ::io_uring_cqe* cqe = nullptr;
        const int rc = queued_ ? ::io_uring_submit_and_wait(ring_.get(), 1) : ::io_uring_wait_cqe(ring_.get(), &cqe);
        if (rc >= 0 && queued_) queued_ -= std::min<unsigned>(queued_, static_cast<unsigned>(rc));
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN) return;   // nothing will come: leak rather than hang
        unsigned head;
        unsigned n = 0;
        io_uring_for_each_cqe(ring_.get(), head, cqe) {
            release(*static_cast<Op*>(::io_uring_cqe_get_data(cqe)));
            ++n;
        }
        ::io_uring_cq_advance(ring_.get(), n);
    }
}

bool FileUring::takes(AsyncOp op, std::uint64_t offset, std::uint64_t length, const void* buffer) const {
    switch (op) {
    case AsyncOp::read:
    case AsyncOp::write:
        // A large buffered request is a copy to or from the page cache that
        // io_uring does inline, on the loop, when the pages are there (1 MiB
        // reads qd8: 1.5 GB/s, against 2.1 GB/s with the copies on the pool).
        if (!file_.direct()) return length <= FileBackend::kCachedReadMax;
        return file_.aligned(offset, length, buffer);
    case AsyncOp::flush: return true;
    case AsyncOp::trim:
    case AsyncOp::write_zeroes: return false;
    }
    return false;
}

FileUring::Op& FileUring::new_op(void* tag, AsyncOp kind, std::byte* data, std::size_t length, std::uint64_t offset) {
    if (free_.empty()) {
        ops_.push_back(std::make_unique<Op>());
        free_.push_back(ops_.back().get());
    }
    Op& op = *free_.back();
    free_.pop_back();
    op = Op{};
    op.tag = tag;
    op.kind = kind;
    op.data = data;
    op.length = length;
    op.offset = offset;
    return op;
}

void FileUring::release(Op& op) {
    op.hold.release();
    free_.push_back(&op);
}

bool FileUring::hold(Op& op) {
    if (!file_.direct()) return true;
    auto held = file_.guard().try_shared(op.offset, op.offset + op.length);
    if (!held) return false;
    op.hold = std::move(*held);
    return true;
}

// NBD lets writes in flight together run in any order: a parked write does
// not hold back another one. start() may finish a request, and the sink may
// submit (and park) more: the list is swapped out first.
void FileUring::start_parked() {
    if (parked_.empty()) return;
    std::vector<Op*> waiting;
    waiting.swap(parked_);
    for (Op* op : waiting) {
        if (hold(*op))
            start(*op);
        else
            parked_.push_back(op);
    }
}

void FileUring::submit_read(std::uint64_t offset, std::span<std::byte> out, void* tag) {
    if (!file_.in_range(offset, out.size())) return sink_->completed_on_loop(tag, EINVAL);
    if (out.empty()) return sink_->completed_on_loop(tag, 0);
    start(new_op(tag, AsyncOp::read, out.data(), out.size(), offset));
}

void FileUring::submit_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, void* tag) {
    if (!file_.in_range(offset, data.size())) return sink_->completed_on_loop(tag, EINVAL);
    if (file_.read_only()) return sink_->completed_on_loop(tag, EROFS);
    if (fua && file_.storage_error() != 0) return sink_->completed_on_loop(tag, EIO);
    if (data.empty()) return sink_->completed_on_loop(tag, 0);
    // The kernel only reads from it.
    Op& op = new_op(tag, AsyncOp::write, const_cast<std::byte*>(data.data()), data.size(), offset);
    op.fua = fua;
    if (!hold(op)) return parked_.push_back(&op);
    start(op);
}

void FileUring::submit_flush(void* tag) {
    if (file_.read_only()) return sink_->completed_on_loop(tag, 0);
    if (file_.storage_error() != 0) return sink_->completed_on_loop(tag, EIO);
    start(new_op(tag, AsyncOp::flush, nullptr, 0, 0));
}

void FileUring::submit_trim(std::uint64_t offset, std::uint64_t length, bool fua, void* tag) {
    sink_->completed_on_loop(tag, file_.trim(offset, length, fua));
}

void FileUring::submit_write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua, void* tag) {
    sink_->completed_on_loop(tag, file_.write_zeroes(offset, length, may_trim, fua));
}

// Every request waits in unsent_, in order, for its cohort (the loop turn's
// submit_pending or the next reap) and for room in the submission queue: a
// request never fails for want of room.
void FileUring::start(Op& op) { unsent_.push_back(&op); }

bool FileUring::cohorts_allowed() const { return file_.direct() && file_.cohorts(); }

std::optional<CohortStats> FileUring::cohort_stats() const {
    if (!cohorts_allowed()) return std::nullopt;
    return CohortStats{cohorts_.passes(), cohorts_.on(), trials_.trials(), trials_.held_off()};
}

bool FileUring::pending() const {
    return queued_ != 0 || cohorts_.admit(in_kernel_, unsent_.size()) != 0;
}

void FileUring::submit_unsent(std::size_t most) {
    while (most != 0 && !unsent_.empty()) {
        std::size_t chunk = std::min(most, cohorts_.chunk());
        const std::size_t before = chunk;
        while (chunk != 0 && !unsent_.empty() && prepare(*unsent_.front())) {
            unsent_.pop_front(), --chunk;
        }
        submit_queued();
        if (chunk == before) return;   // no room, even after submitting: the kernel takes nothing now
        most -= before - chunk;
    }
}

bool FileUring::prepare(Op& op) {
    ::io_uring_sqe* sqe = ::io_uring_get_sqe(ring_.get());
    if (!sqe) {   // the submission queue is full: hand it to the kernel now
        submit_queued();
        sqe = ::io_uring_get_sqe(ring_.get());
    }
    // The kernel took nothing (io_uring_enter: EAGAIN, ENOMEM, EBUSY): the
    // request waits for the next completion or loop turn (submit_pending).
    if (!sqe) return false;
    const int fd = file_.fd();
    std::byte* at = op.data + op.done;
    const unsigned left = static_cast<unsigned>(op.length - op.done);
    const std::uint64_t where = op.offset + op.done;
    if (op.kind == AsyncOp::flush) {   // as FileBackend::flush: the file's own description for FLUSH
        ::io_uring_prep_fsync(sqe, file_.sync_fd(), IORING_FSYNC_DATASYNC);
    } else if (op.syncing) {
        ::io_uring_prep_fsync(sqe, fd, IORING_FSYNC_DATASYNC);
    } else if (op.kind == AsyncOp::read) {
        ::io_uring_prep_read(sqe, fd, at, left, where);
    } else {
        ::io_uring_prep_write(sqe, fd, at, left, where);
        if (op.fua && !op.sync_after) sqe->rw_flags = RWF_DSYNC;   // durable before the completion
    }
    ::io_uring_sqe_set_data(sqe, &op);
    ++queued_;
    return true;
}

void FileUring::submit_pending() {
    submit_queued();   // what the kernel refused on an earlier turn
    submit_unsent(cohorts_.admit(in_kernel_, unsent_.size()));
}

void FileUring::submit_queued() {
    if (queued_ == 0) return;
    const int rc = ::io_uring_submit(ring_.get());
    // EAGAIN / ENOMEM / EBUSY: the entries stay queued and go with the next
    // call (the next reap, or the loop's next turn: pending() is still true).
    if (rc > 0) {
        const unsigned taken = std::min<unsigned>(queued_, static_cast<unsigned>(rc));
        queued_ -= taken;
        in_kernel_ += taken;
    }
}

// Completions mean the disk may stand idle: the next cohort goes in first,
// then the completions are reported (their replies, and the client's next
// requests, join the cohort after it).
void FileUring::reap(std::uint64_t signals) {
    if (const unsigned ready = ::io_uring_cq_ready(ring_.get()); ready != 0) {
        if (cohorts_allowed()) {
            cohorts_.reaped(in_kernel_, ready, signals);
            trials_.reaped(std::chrono::steady_clock::now().time_since_epoch(), ready, cohorts_.passes());
            cohorts_.hold_off(trials_.off());
        }
        submit_queued();
        submit_unsent(cohorts_.at_completions(in_kernel_, ready, unsent_.size()));
    }
    start_parked();
    ::io_uring_cqe* cqes[reap_batch];
    unsigned n;
    do {
        n = ::io_uring_peek_batch_cqe(ring_.get(), cqes, reap_batch);
        std::pair<Op*, int> done[reap_batch];
        for (unsigned i = 0; i < n; ++i) done[i] = {static_cast<Op*>(::io_uring_cqe_get_data(cqes[i])), cqes[i]->res};
        ::io_uring_cq_advance(ring_.get(), n);
        in_kernel_ -= std::min<std::size_t>(in_kernel_, n);
        for (unsigned i = 0; i < n; ++i) on_result(*done[i].first, done[i].second);
    } while (n == reap_batch);
}

void FileUring::on_result(Op& op, int res) {
    if ((res == -EAGAIN || res == -EINTR) && ++op.retries < max_retries) return start(op);
    // A failed fsync (or FUA write, as in FileBackend::write) is the storage's
    // failure to persist: remembered, so that later FLUSH and FUA fail too.
    if (op.kind == AsyncOp::flush) return finish(op, res < 0 ? file_.storage_failed(-res, "fsync") : 0);
    if (op.syncing) return finish(op, res < 0 ? file_.storage_failed(-res, "fdatasync after a FUA write") : 0);
    if (res == -EIO && op.kind == AsyncOp::write && op.fua) return finish(op, file_.storage_failed(EIO, "FUA write"));
    if (res < 0 && op.kind == AsyncOp::write && op.fua && !op.sync_after && (res == -EOPNOTSUPP || res == -ENOSYS)) {
        op.sync_after = true;   // no RWF_DSYNC here: as pwrite_full, write then fdatasync
        return start(op);
    }
    if (res < 0) return finish(op, -res);
    if (res == 0 && op.kind == AsyncOp::read) {   // end of file (it shrank): zeros, as pread_full
        std::memset(op.data + op.done, 0, op.length - op.done);
        return finish(op, 0);
    }
    if (res == 0) return finish(op, EIO);   // a write of nothing would loop for ever
    op.done += static_cast<std::size_t>(res);
    if (op.done < op.length) return start(op);   // short: the rest
    if (op.sync_after) {
        op.syncing = true;
        return start(op);
    }
    finish(op, 0);
}

void FileUring::finish(Op& op, int error) {
    void* tag = op.tag;
    release(op);   // first: the sink may start a request that reuses it
    sink_->completed_on_loop(tag, error);
}

}   // namespace nbdsched::backend
