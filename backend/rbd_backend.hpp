// An RBD image on a Ceph cluster, through librbd's C API.
//
// Opening (RbdBackend::open): connects as client.<client> with the given
// ceph.conf (its keyring line supplies the key), sets the timeouts, opens
// pool[/namespace]/image and takes the image's exclusive lock, so that one
// daemon writes an image at a time. A lock held by another client fails the
// open with an error naming the holder; with break_lock the holder is
// blocklisted (by this process, whatever rbd_blocklist_on_break_lock says)
// and its lock broken first: fail-over after its host died. The size is
// the image's, read again by refresh_size() (a reload after `rbd
// resize`). A lock whose holder does not refuse at once (a dead
// process, until the cluster drops its watch) is waited for, and the wait
// told through RbdSpec::on_lock_wait (the daemon logs it: this floor has no
// log). With lock_later (a --takeover) the image is opened
// without the lock; acquire_exclusive() takes it once the old process
// released it (release_exclusive(): a planned restart, docs/rbd.md).
// librbd's cache is off unless RbdSpec::cache asks for it; a pool's or
// image's own configuration that turns it on anyway is refused at the
// open, one that changes the cache asked for is told through `warn`; one
// that turns librbd's copy of each write off is refused too
// (rbd_image_config.hpp).
//
// Data requests go through the asynchronous path (async_backend.hpp):
// rbd_aio_* with a completion callback that hands the result to the sink.
// FUA = the write, then a flush, before the completion (with the cache
// on too: librbd's flush waits for every write answered before it). TRIM = discard;
// WRITE_ZEROES = rbd_aio_write_zeroes (librbd punches or zeroes as the
// image allows). The synchronous calls use librbd's blocking API; block
// status asks librbd which extents hold data (rbd_extents.cpp).
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/async_backend.hpp"
#include "backend/backend.hpp"
#include "backend/spec.hpp"

namespace nbdsched::backend {

class RbdBackend final : public Backend, public AsyncBackend {
public:
    // nullptr and a message in `error` on failure ("rbd/vol1: ..."). `warn`
    // hears of an image whose own configuration changes the librbd cache
    // the spec asked for ("rbd rbd/vol1: ...").
    static std::unique_ptr<RbdBackend> open(const RbdSpec& spec, std::string& error,
                                            const std::function<void(const std::string&)>& warn = nullptr);
    ~RbdBackend() override;
    RbdBackend(const RbdBackend&) = delete;
    RbdBackend& operator=(const RbdBackend&) = delete;

    std::uint64_t size() const override;
    bool blocking() const override { return true; }
    std::optional<bool> detected_rotational() const override { return std::nullopt; }
    std::string describe() const override;
    AsyncBackend* async() override { return this; }
    int refresh_size() override;
    std::string release_exclusive() override;
    // After a release of our own, a holder found is the new process of a
    // failed hand-over, which never served: its lock is broken.
    std::string acquire_exclusive(std::string& broke) override;

    int read(std::uint64_t offset, std::span<std::byte> out) override;
    int write(std::uint64_t offset, std::span<const std::byte> data, bool fua) override;
    int flush() override;
    int trim(std::uint64_t offset, std::uint64_t length, bool fua) override;
    int write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;
    // Data and holes from librbd's diff of the image (rbd_extents.cpp).
    int extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) override;

    void set_sink(CompletionSink* sink) override { sink_ = sink; }
    void submit_read(std::uint64_t offset, std::span<std::byte> out, void* tag) override;
    void submit_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, void* tag) override;
    void submit_flush(void* tag) override;
    void submit_trim(std::uint64_t offset, std::uint64_t length, bool fua, void* tag) override;
    void submit_write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua,
                             void* tag) override;

    struct Handles;   // librados/librbd handles (rbd_open.cpp)
    struct Op;        // one asynchronous request in flight

private:
    explicit RbdBackend(std::unique_ptr<Handles> handles, std::string name);
    bool check(std::uint64_t offset, std::uint64_t length, void* tag);
    // A write's bounds against the image's size as librbd has it (a shrink
    // not reloaded yet): ENOSPC past it, else 0 (rbd_io.cpp).
    int past_image_end(std::uint64_t offset, std::uint64_t length) const;
    bool image_size_current() const;
    void read_image_size();   // blocking: librbd may refresh the image first
    // `job` on a thread of its own, waited for by the destructor; false
    // once the destructor began (the caller goes on without it).
    bool later(std::function<void()> job);
    void submit_within(Op* op);
    void start_within(Op* op);
    void finish(Op* op, long long r);
    void start(Op* op);
    static void on_complete(void* completion, void* arg);

    std::unique_ptr<Handles> h_;
    std::string name_;   // pool/[namespace/]image
    CompletionSink* sink_ = nullptr;
    // Size reads for writes after a header change (later()), waited for
    // by the destructor before h_ closes the image.
    std::mutex later_mutex_;
    std::vector<std::future<void>> later_;
    bool closing_ = false;
};

}   // namespace nbdsched::backend
