// RBD data requests: librbd's blocking calls for the synchronous interface,
// rbd_aio_* with a completion callback for the asynchronous one.
#include <cerrno>
#include <chrono>
#include <sys/uio.h>

#include "backend/rbd_backend.hpp"
#include "backend/rbd_handles.hpp"

namespace nbdsched::backend {

namespace {

// librbd returns -errno, or a byte count for reads.
int to_errno(long long r) { return r < 0 ? static_cast<int>(-r) : 0; }

// NBD_CMD_FLAG_NO_HOLE: the range stays allocated (written zeros); else
// librbd may deallocate it.
int zero_flags(bool may_trim) { return may_trim ? 0 : RBD_WRITE_ZEROES_FLAG_THICK_PROVISION; }

}   // namespace

bool RbdBackend::check(std::uint64_t offset, std::uint64_t length, void* tag) {
    const std::uint64_t size = h_->size;
    if (offset <= size && length <= size - offset) return true;
    if (tag) sink_->completed(tag, EINVAL);
    return false;
}

// A write inside the served size (h_->size, which a reload changes) but
// past the image's end now (shrunk, not reloaded yet): librbd would clip it
// and report success with its tail dropped. ENOSPC, as the NBD spec wants
// for a write beyond the end; a read there fails in librbd (EIO).
int RbdBackend::past_image_end(std::uint64_t offset, std::uint64_t length) const {
    const std::uint64_t end = h_->image_size;
    return offset <= end && length <= end - offset ? 0 : ENOSPC;
}

bool RbdBackend::image_size_current() const { return h_->size_read_at == h_->header_changes; }

bool RbdBackend::later(std::function<void()> job) {
    std::lock_guard lock(later_mutex_);
    if (closing_) return false;
    std::erase_if(later_, [](const std::future<void>& f) {
        return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    });
    later_.push_back(std::async(std::launch::async, std::move(job)));
    return true;
}

int RbdBackend::read(std::uint64_t offset, std::span<std::byte> out) {
    if (!check(offset, out.size(), nullptr)) return EINVAL;
    auto r = librbd().rbd_read(h_->image, offset, out.size(), reinterpret_cast<char*>(out.data()));
    if (r >= 0 && static_cast<std::size_t>(r) != out.size()) return EIO;
    return to_errno(r);
}

int RbdBackend::write(std::uint64_t offset, std::span<const std::byte> data, bool fua) {
    if (!check(offset, data.size(), nullptr)) return EINVAL;
    if (!image_size_current()) read_image_size();   // the I/O pool's thread: it may wait
    if (int err = past_image_end(offset, data.size())) return err;
    auto r = librbd().rbd_write(h_->image, offset, data.size(), reinterpret_cast<const char*>(data.data()));
    if (r >= 0 && static_cast<std::size_t>(r) != data.size()) return EIO;   // librbd clipped it
    if (r >= 0 && fua) return flush();
    return to_errno(r);
}

int RbdBackend::flush() { return to_errno(librbd().rbd_flush(h_->image)); }

int RbdBackend::trim(std::uint64_t offset, std::uint64_t length, bool fua) {
    if (!check(offset, length, nullptr)) return EINVAL;
    int r = librbd().rbd_discard(h_->image, offset, length);
    if (r >= 0 && fua) return flush();
    return to_errno(r);
}

int RbdBackend::write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) {
    if (!check(offset, length, nullptr)) return EINVAL;
    if (!image_size_current()) read_image_size();
    if (int err = past_image_end(offset, length)) return err;
    int r = librbd().rbd_write_zeroes(h_->image, offset, length, zero_flags(may_trim), 0);
    if (r >= 0 && fua) return flush();
    return to_errno(r);
}

// One request in flight; a FUA write becomes a flush when its write is done.
struct RbdBackend::Op {
    enum class Kind { read,
                      write,
                      flush,
                      trim,
                      zero } kind;
    RbdBackend* self;
    void* tag;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    iovec iov{};
    bool then_flush = false;
    bool may_trim = true;
    std::uint64_t size_read_at = 0;   // a write's: the header change its bounds were checked at
};

void RbdBackend::on_complete(void* completion, void* arg) {
    auto c = static_cast<rbd_completion_t>(completion);
    auto* op = static_cast<Op*>(arg);
    long long r = librbd().rbd_aio_get_return_value(c);
    librbd().rbd_aio_release(c);
    if (op->kind == Op::Kind::read && r >= 0 && static_cast<std::uint64_t>(r) != op->length) r = -EIO;
    const bool writes = op->kind == Op::Kind::write || op->kind == Op::Kind::zero;
    if (writes && r >= 0 && op->size_read_at != op->self->h_->header_changes) {
        // The header changed while it was in flight: a shrink may have
        // clipped it. The size is read on a thread of its own, not librbd's
        // (a refresh would wait on it); while the image closes, the size
        // known is used.
        if (op->self->later([op, r] {
                op->self->read_image_size();
                op->self->finish(op, r);
            }))
            return;
    }
    op->self->finish(op, r);
}

// A request done (a write: inside the image's size as last read); a FUA
// write goes on with its flush.
void RbdBackend::finish(Op* op, long long r) {
    const bool writes = op->kind == Op::Kind::write || op->kind == Op::Kind::zero;
    if (writes && r >= 0)
        if (int err = past_image_end(op->offset, op->length)) r = -err;
    if (r >= 0 && op->then_flush) {
        op->then_flush = false;
        op->kind = Op::Kind::flush;
        return start(op);
    }
    sink_->completed(op->tag, to_errno(r));
    delete op;
}

// A write or write-zeroes against the image's size: read again first, on
// a thread of its own, after a change of the image's header.
void RbdBackend::submit_within(Op* op) {
    if (image_size_current()) return start_within(op);
    if (!later([this, op] {
            read_image_size();
            start_within(op);
        }))
        start_within(op);   // closing: against the size known
}

void RbdBackend::start_within(Op* op) {
    op->size_read_at = h_->size_read_at;
    if (int err = past_image_end(op->offset, op->length)) {
        sink_->completed(op->tag, err);
        delete op;
        return;
    }
    start(op);
}

void RbdBackend::start(Op* op) {
    rbd_completion_t c;
    int r = librbd().rbd_aio_create_completion(op, &RbdBackend::on_complete, &c);
    if (r < 0) {
        sink_->completed(op->tag, to_errno(r));
        delete op;
        return;
    }
    switch (op->kind) {
    case Op::Kind::read: r = librbd().rbd_aio_readv(h_->image, &op->iov, 1, op->offset, c); break;
    case Op::Kind::write: r = librbd().rbd_aio_writev(h_->image, &op->iov, 1, op->offset, c); break;
    case Op::Kind::flush: r = librbd().rbd_aio_flush(h_->image, c); break;
    case Op::Kind::trim: r = librbd().rbd_aio_discard(h_->image, op->offset, op->length, c); break;
    case Op::Kind::zero: r = librbd().rbd_aio_write_zeroes(h_->image, op->offset, op->length, c, zero_flags(op->may_trim), 0); break;
    }
    if (r < 0) {   // not started: the callback will not run
        librbd().rbd_aio_release(c);
        sink_->completed(op->tag, to_errno(r));
        delete op;
    }
}

void RbdBackend::submit_read(std::uint64_t offset, std::span<std::byte> out, void* tag) {
    if (!check(offset, out.size(), tag)) return;
    start(new Op{Op::Kind::read, this, tag, offset, out.size(), {out.data(), out.size()}});
}

void RbdBackend::submit_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, void* tag) {
    if (!check(offset, data.size(), tag)) return;
    // librbd only reads from the iovec of a write.
    iovec iov{const_cast<std::byte*>(data.data()), data.size()};
    submit_within(new Op{Op::Kind::write, this, tag, offset, data.size(), iov, fua});
}

void RbdBackend::submit_flush(void* tag) { start(new Op{Op::Kind::flush, this, tag}); }

void RbdBackend::submit_trim(std::uint64_t offset, std::uint64_t length, bool fua, void* tag) {
    if (!check(offset, length, tag)) return;
    start(new Op{Op::Kind::trim, this, tag, offset, length, {}, fua});
}

void RbdBackend::submit_write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua,
                                     void* tag) {
    if (!check(offset, length, tag)) return;
    submit_within(new Op{Op::Kind::zero, this, tag, offset, length, {}, fua, may_trim});
}

}   // namespace nbdsched::backend
