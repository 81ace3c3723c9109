// Where a device's data lives. Backends are synchronous and thread-safe: the
// daemon calls a blocking() backend from its I/O thread pool and a
// non-blocking one (RAM) inline on the event loop. One that can also start
// requests without blocking (RBD) offers an AsyncBackend through async().
// Errors are errno values.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/extents.hpp"

namespace nbdsched::backend {

class AsyncBackend;

// Names one read_pinned() or write_pinned() for its unpin().
using PinId = std::uint64_t;

class Backend {
public:
    virtual ~Backend() = default;

    virtual std::uint64_t size() const = 0;
    virtual bool blocking() const = 0;   // true: keep it off the event loop
    // Rotational as detected from the storage underneath (sysfs for a file or
    // block device); nullopt when there is nothing to detect (RAM).
    virtual std::optional<bool> detected_rotational() const = 0;
    virtual std::string describe() const = 0;   // for logs: "ram 1GiB", "file /x (O_DIRECT)"
    // Bytes of the daemon's own memory that hold the device's data now (RAM:
    // its pages and page tables; a TRIM lowers it), for `ctl stats` and the
    // metrics; nullopt where the data lives elsewhere (files, RBD). Safe
    // from any thread beside requests.
    virtual std::optional<std::uint64_t> memory_bytes() const { return std::nullopt; }
    // The first failure to persist acknowledged data that the backend
    // remembers (an errno; 0: none): from it on, FLUSH and FUA fail. For
    // `ctl stats` and the metrics; safe from any thread.
    virtual int storage_error() const { return 0; }
    // The asynchronous path for data requests (async_backend.hpp), or nullptr.
    virtual AsyncBackend* async() { return nullptr; }

    // All return 0 or an errno (EIO, ENOSPC, ...). Ranges are checked by the
    // caller, but implementations still refuse out-of-range with EINVAL.
    virtual int read(std::uint64_t offset, std::span<std::byte> out) = 0;
    // A blocking backend's read that can finish at once (the page cache holds
    // the data): its result, or nullopt when it would block and must go to
    // the thread pool. Lets cached reads skip the pool's two thread hand-offs
    // (bench exp8). Only called on blocking backends.
    virtual std::optional<int> read_if_cached(std::uint64_t offset, std::span<std::byte> out) {
        (void)offset;
        (void)out;
        return std::nullopt;
    }
    // A read without a copy, for a backend whose data sits in its own memory
    // (RAM): appends the pieces of [offset, offset+length) to `out` as spans
    // of that memory (holes: spans of zeros) and pins it. Pinned memory is
    // not freed or reused until unpin() of the pin returned (pages a TRIM
    // frees meanwhile wait for it), but a later write may change it in
    // place: a reply sent from it shows old or new bytes, as NBD allows for
    // overlapping requests; everything written before the call is in it.
    // nullopt: no such memory (nothing pinned; use read()).
    virtual std::optional<PinId> read_pinned(std::uint64_t offset, std::uint64_t length,
                                             std::vector<std::span<const std::byte>>& out) {
        (void)offset, (void)length, (void)out;
        return std::nullopt;
    }
    // The other way: a client's WRITE payload received straight into the
    // backend's memory. Appends [offset, offset+length) to `out` as spans of
    // that memory, allocated as needed, and pins it as read_pinned() does;
    // the caller puts the data there and calls unpin_written() (or unpin(pin),
    // which keeps whatever was allocated, but leaves it the write's: a later
    // unpin_written() over those pages may give back the ones left all
    // zeros). Bytes put there are
    // the device's data at once (readers may see them before the write is
    // acknowledged, as NBD allows for requests in flight together), so only
    // a backend whose writes cannot fail once memory is found may offer it:
    // a wrapper that must see or fail writes (fault injection) does not.
    // nullopt: no such memory, or none left (nothing pinned; use write()).
    virtual std::optional<PinId> write_pinned(std::uint64_t offset, std::uint64_t length,
                                              std::vector<std::span<std::byte>>& out) {
        (void)offset, (void)length, (void)out;
        return std::nullopt;
    }
    // True when write() only copies into the backend's own memory: it never
    // blocks and cannot fail once memory is found, and what it copied is the
    // device's data (RAM). A connection then writes a WRITE payload it
    // already holds whole at once, as it would receive a larger one in place
    // (write_pinned(), same rule and same exception: fault injection), and
    // without a pin: write() holds the pages for its copy.
    virtual bool writes_to_memory() const { return false; }
    // Ends the read_pinned() or write_pinned() that returned `pin`.
    virtual void unpin(PinId pin) { (void)pin; }
    // Ends the write_pinned() of [offset, offset+length) that returned `pin`
    // once its payload is in, or given up on (the connection closed in the
    // middle of it): in place of unpin(pin). A backend that allocated memory
    // for the range may take back what the payload left all zeros, so that
    // zeros received in place cost what zeros given to write() cost. The
    // default: unpin(pin).
    virtual void unpin_written(PinId pin, std::uint64_t offset, std::uint64_t length) {
        (void)offset, (void)length;
        unpin(pin);
    }
    virtual int write(std::uint64_t offset, std::span<const std::byte> data, bool fua) = 0;
    virtual int flush() = 0;
    virtual int trim(std::uint64_t offset, std::uint64_t length, bool fua) = 0;
    // may_trim: the client allows a hole (NBD_CMD_FLAG_NO_HOLE not set).
    virtual int write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) = 0;
    // NBD_CMD_FLAG_FAST_ZERO: zero only where it costs far less than writing
    // zeros (a hole punched, a range marked zero), else ENOTSUP at once and
    // nothing changed. The default knows no fast way.
    virtual int write_zeroes_fast(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) {
        (void)offset, (void)length, (void)may_trim, (void)fua;
        return ENOTSUP;
    }

    // The allocation of [offset, offset+length) from offset on, into `out`
    // (which may fill up before the end). The default: all data, which is
    // always true (a hole is only a promise that the bytes read as zeros).
    virtual int extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) {
        (void)offset;
        out.add(length, false);
        return 0;
    }
    // NBD_CMD_CACHE: a hint that the range will be read soon. Nothing to do
    // by default (RAM is always "cached").
    virtual int cache(std::uint64_t offset, std::uint64_t length) {
        (void)offset, (void)length;
        return 0;
    }

    // A reload: reads the size again where it comes from the storage (an
    // RBD image after `rbd resize`, a file or block device whose size is
    // not configured); size() returns it from then on, and requests past
    // it fail with EINVAL. 0 or an errno (the size stays as it was). A
    // blocking() backend's runs on a pool thread beside its requests (it may
    // wait for the storage: daemon/process/reload.hpp), so size() is atomic.
    virtual int refresh_size() { return 0; }
    // A planned restart: storage that one process at a time may write (an
    // RBD image's exclusive lock) is let go of by the old process once its
    // requests are done, and taken by the new one before it serves (or by
    // the old one again when the hand-over fails). "" or why not; nothing
    // to do by default. `broke`: whose lock was broken to get it back, if
    // anybody's.
    virtual std::string release_exclusive() { return ""; }
    virtual std::string acquire_exclusive(std::string& broke) {
        (void)broke;
        return "";
    }
    // The start this backend was opened for failed before it served: what
    // the open changed in the storage goes back (a file grown for it is
    // shrunk back, one created for it removed), unless something else wrote
    // there since. What was done, or why not, for the log; "" when there
    // was nothing to undo.
    virtual std::string undo_open() { return ""; }
};

}   // namespace nbdsched::backend
