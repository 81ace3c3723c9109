// One NBD request on its way from a connection through a device's scheduler
// and backend and back. Owned and recycled by the connection that read it
// (its data buffer comes from and goes back to the thread's buffer pool, so
// steady-state I/O allocates nothing); the device only borrows it between
// submit() and RequestSink::request_done().
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "backend/backend.hpp"
#include "daemon/device/buffer_pool.hpp"
#include "daemon/device/handler_slot.hpp"
#include "nbd/transmission.hpp"
#include "sched/request.hpp"

namespace boost::asio {
class io_context;
}

namespace nbdsched::daemon {

// A data buffer aligned for O_DIRECT, taken from the thread's buffer pool
// as a request needs it and given back by release() (or when destroyed).
class AlignedBuffer {
public:
    static constexpr std::size_t alignment = buffer_pool::alignment;

    std::span<std::byte> span(std::size_t n) { return {data_.get(), n}; }
    std::byte* data() { return data_.get(); }
    std::size_t capacity() const { return data_.get_deleter().capacity; }
    // Makes room for n bytes; the old contents are not kept.
    void reserve(std::size_t n) {
        if (n <= capacity()) return;
        release();
        std::size_t capacity = 0;
        data_.reset(buffer_pool::take(n, capacity));
        data_.get_deleter().capacity = capacity;
    }
    void release() {
        data_.reset();
        data_.get_deleter().capacity = 0;
    }
    // Gives the memory away (free() it, or buffer_pool::give_disowned()
    // it); the buffer is empty afterwards. Without disown() the pool would
    // count it as held for ever, and its idle release would keep that much
    // (daemon/process/idle_memory.hpp).
    std::byte* take() {
        buffer_pool::disown(capacity());
        data_.get_deleter().capacity = 0;
        return data_.release();
    }

private:
    std::unique_ptr<std::byte, buffer_pool::Give> data_;
};

struct IoRequest;

// Whoever submitted a request hears back here, on the event loop thread.
class RequestSink {
public:
    virtual void request_done(IoRequest& request) = 0;

protected:
    ~RequestSink() = default;
};

struct IoRequest {
    // --- set by the connection before submit()
    nbd::RequestHeader header;   // as the client sent it
    RequestSink* sink = nullptr;
    // The event loop the sink runs on: request_done() comes on it (posted
    // when another loop finishes the request). Null: the device's own.
    boost::asio::io_context* home = nullptr;
    AlignedBuffer buffer;   // READ: filled by the backend; WRITE: the payload
    sched::Op op = sched::Op::read;
    std::uint64_t offset = 0;   // device-relative (export offset applied)
    std::uint64_t length = 0;
    bool fua = false;
    bool may_trim = true;     // WRITE_ZEROES without NO_HOLE
    bool fast_zero = false;   // WRITE_ZEROES with FAST_ZERO: ENOTSUP unless cheap
    sched::QueueId queue = 0;
    sched::GroupId group = 0;
    bool may_pin = false;   // a client READ: its reply may be sent from the backend's memory
    // Its connection closed: nobody will read the reply. A READ not
    // dispatched yet is then answered at dispatch without being read (no
    // backend I/O, no device time in a timing model); other requests run.
    bool abandoned = false;
    // A WRITE whose payload the connection received straight into the
    // backend's memory (Device::pin_write): dispatch writes nothing, the
    // scheduler only decides when it is acknowledged. While the payload is
    // received, `targets` are its destination and `pinned` is set.
    bool in_place = false;
    std::vector<std::span<std::byte>> targets;   // reused: no allocation per request
    // An in-place payload whose client stalled: its first `placed` bytes went
    // in place, then the pin went and the rest came into `buffer`; submit()
    // makes the request a write of that rest alone.
    std::uint64_t placed = 0;

    // --- set by the device
    sched::RequestId id = 0;
    sched::Time submitted_at{};   // for the latency statistics
    sched::Time release_at{};     // timing model: reply not before this
    int backend_errno = 0;        // 0 or the backend's errno
    // The thread pool's operation that runs it (io_engine: threads), one at
    // a time: no allocation per request once it exists. Detached: a pool
    // stopped at exit destroys its unrun operations after the requests.
    std::optional<DetachedSlot> pool_slot;
    // A READ answered from pinned backend memory (buffer unused): the reply
    // sends `pieces`, and whoever releases the request calls
    // pinned->unpin(pin) (an in-place WRITE's pin, see `in_place`, is let go
    // as its payload ends).
    backend::Backend* pinned = nullptr;
    backend::PinId pin = 0;
    std::vector<std::span<const std::byte>> pieces;   // reused: no allocation per request

    // --- the reply, encoded by the connection
    std::uint32_t error = 0;   // NBD error value
    std::array<std::uint8_t, nbd::max_reply_header> reply{};
    std::uint8_t reply_size = 0;
    bool send_data = false;            // READ / BLOCK_STATUS success: buffer follows the header
    std::uint32_t data_bytes = 0;      // how much of buffer: the READ's length, or the encoded descriptors
    std::uint64_t charged_bytes = 0;   // counted against the in-flight byte limit
};

}   // namespace nbdsched::daemon
