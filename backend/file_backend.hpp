// File backend: a regular file or a block device, positional I/O.
//
// Opening (FileBackend::open):
//   - missing regular file: created with `size` bytes (sparse); size 0 is an
//     error (nothing to create).
//   - existing regular file: size 0 uses the file's size (an empty file is an
//     error). A file smaller than `size` is grown to it (sparse, logged by
//     the caller from grown()); a file larger than `size` is refused, because
//     silently serving a prefix or truncating would hide a configuration typo
//     or destroy data. A start that fails after the open undoes the growth
//     or the creation (undo_open).
//   - block device: size from BLKGETSIZE64; size 0 uses it all, a larger
//     `size` is refused, a smaller one serves the first `size` bytes.
//   - opened O_RDWR; if that is refused (EACCES, EROFS) it is opened
//     read-only, read_only() is true and writes fail with EROFS.
//   - direct: O_DIRECT. Requests that are not aligned (offset, length or
//     buffer) to alignment() go through aligned bounce buffers, and partial
//     blocks are read-modify-written holding their blocks exclusively
//     (block_guard.hpp); every other write, zero or trim holds its bytes
//     shared, so no mutation of a block is undone by a read-modify-write of
//     it (overlapping or not). The size must then be a multiple of alignment()
//     (checked before a file is grown: a refused start leaves it as it was).
//
// Semantics: FLUSH = fdatasync. FUA = pwritev2(RWF_DSYNC) (pwrite+fdatasync
// where unsupported), durable before returning. TRIM = fallocate(PUNCH_HOLE|
// KEEP_SIZE) on files, BLKDISCARD (aligned part) on block devices; a device
// without discard support makes TRIM a successful no-op (TRIM is advisory).
// WRITE_ZEROES = PUNCH_HOLE when may_trim (files), else ZERO_RANGE; falls back
// to writing zeros when fallocate is unsupported.
//
// A failure to persist (writeback errors): Linux reports a writeback error
// once per open file description (errseq_t), to the first fsync that asks,
// and drops the pages it could not write; the next fsync returns 0 though
// the data is lost. So the backend remembers the first such failure (any
// failed fdatasync or ring fsync, and a FUA write that fails with EIO) and
// from then on every FLUSH and every FUA request (write, trim, zeroes)
// fails with EIO without asking the kernel; Options::on_storage_failure
// hears it once. FLUSH syncs through a second open file description of the
// same file (sync_fd()), which FUA writes never sync through: a writeback
// error a FUA write's RWF_DSYNC consumed on fd() (ENOSPC from a thin
// device, ambiguous with a plain allocation failure) still reaches the next
// FLUSH there. Reads and plain writes go on. docs/reliability.md.
//
// A file deleted, replaced (its path names another file now) or truncated
// behind the daemon's back is noticed by the threads' FLUSH (one fstat and
// one stat) and by every reload, on both engines, and told once per kind
// through Options::on_storage_warning. Requests go on as before: the data
// lives in the inode the daemon holds open, as a loop device or nbdkit
// would serve it; only a restart will not find it.
//
// io_uring: with Options::io_uring, reads, writes and flushes can also go
// through a ring (async(), file_uring.hpp) with the same semantics; when the
// kernel refuses a ring, async() is nullptr and io_uring_error() says why.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <sys/stat.h>

#include "backend/async_backend.hpp"
#include "backend/backend.hpp"
#include "backend/block_guard.hpp"

namespace nbdsched::backend {

class FileBackend final : public Backend {
public:
    struct Options {
        std::string path;
        std::uint64_t size = 0;   // 0 = the existing file's / device's size
        bool direct = false;
        bool io_uring = false;    // open a ring for async() (where built and allowed)
        bool io_cohorts = true;   // the ring may hold O_DIRECT requests back in cohorts (submission_cohorts.hpp)
        // Called once, when the storage first fails to persist (see above).
        std::function<void(const std::string&)> on_storage_failure = nullptr;
        // Called once per kind: the file deleted, replaced or truncated (see above).
        std::function<void(const std::string&)> on_storage_warning = nullptr;
    };

    // nullptr and a message in `error` on failure ("open /x: Permission denied").
    static std::unique_ptr<FileBackend> open(const Options& options, std::string& error);
    ~FileBackend() override;
    FileBackend(const FileBackend&) = delete;
    FileBackend& operator=(const FileBackend&) = delete;

    std::uint64_t size() const override { return size_.load(std::memory_order_relaxed); }
    bool blocking() const override { return true; }
    std::optional<bool> detected_rotational() const override { return rotational_; }
    std::string describe() const override;
    AsyncBackend* async() override;

    int read(std::uint64_t offset, std::span<std::byte> out) override;
    // Buffered mode only: RWF_NOWAIT, up to kCachedReadMax bytes.
    std::optional<int> read_if_cached(std::uint64_t offset, std::span<std::byte> out) override;
    // Larger reads go to the pool even when cached: copying them would hold
    // the event loop (every connection) for too long.
    static constexpr std::size_t kCachedReadMax = 256 * 1024;
    int write(std::uint64_t offset, std::span<const std::byte> data, bool fua) override;
    int flush() override;
    int trim(std::uint64_t offset, std::uint64_t length, bool fua) override;
    int write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;
    // fallocate only (PUNCH_HOLE, or ZERO_RANGE on files with NO_HOLE); never
    // the write-zeros fallback. A block device's ZERO_RANGE may write zeros
    // in the kernel, so there only PUNCH_HOLE counts (not with NO_HOLE, nor
    // where the queue has no write-zeroes), and no ZERO_RANGE after it.
    int write_zeroes_fast(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) override;
    // SEEK_DATA / SEEK_HOLE; where they are not supported (block devices,
    // some filesystems) everything is data.
    int extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) override;
    // posix_fadvise(WILLNEED): the kernel starts reading the range into the
    // page cache and returns (buffered mode; O_DIRECT bypasses the cache).
    int cache(std::uint64_t offset, std::uint64_t length) override;
    // Only where no size is configured: the file's or device's size now
    // (a multiple of alignment() with O_DIRECT).
    int refresh_size() override;
    // A failed start: the file grown or created by open() goes back, while
    // nobody wrote to what open() added (SEEK_DATA).
    std::string undo_open() override;

    // Why Options::io_uring got no ring ("" when it did or was not asked).
    const std::string& io_uring_error() const { return io_uring_error_; }
    int fd() const { return fd_; }
    // What FLUSH syncs (the same file through its own open file description).
    int sync_fd() const { return sync_fd_; }
    int storage_error() const override { return storage_error_.load(std::memory_order_acquire); }
    // Remembers `err` from `what` ("fdatasync") as the storage's failure to
    // persist, if it is the first (logged through on_storage_failure once);
    // returns err, the answer for the request that saw it.
    int storage_failed(int err, const char* what);
    bool in_range(std::uint64_t offset, std::uint64_t length) const;
    // Offset, length and buffer all multiples of alignment() (O_DIRECT as is).
    bool aligned(std::uint64_t offset, std::uint64_t length, const void* buffer) const;
    bool is_block_device() const { return block_device_; }
    bool read_only() const { return read_only_; }
    bool direct() const { return direct_; }
    // Whether the ring may send O_DIRECT requests in cohorts (io_cohorts: auto).
    bool cohorts() const { return cohorts_; }
    bool created() const { return created_; }            // the file did not exist
    bool grown() const { return grown_; }                // an existing file was extended
    std::uint32_t alignment() const { return align_; }   // O_DIRECT granularity
    // Optimal/max I/O sizes of the device underneath (0 = unknown), for
    // read-ahead sizing and NBD_INFO_BLOCK_SIZE.
    std::uint32_t optimal_io_bytes() const { return optimal_io_; }
    std::uint32_t max_io_bytes() const { return max_io_; }
    // O_DIRECT only: what a mutation of [offset, offset+length) holds while
    // it changes the file (the io_uring engine's writes hold it too).
    BlockGuard& guard() { return guard_; }

private:
    FileBackend() = default;
    bool finish_open(const Options& options, struct ::stat& st, std::string& error);
    int check_mutation(std::uint64_t offset, std::uint64_t length) const;   // EINVAL, EROFS or 0
    void open_ring();
    void open_sync_fd();
    void check_still_there();   // deleted, replaced, truncated: warned once each
    int direct_read(std::uint64_t offset, std::span<std::byte> out);
    int direct_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, bool* sync_failed);
    int zero_fill(std::uint64_t offset, std::uint64_t length, bool fua);
    // fallocate zeroing: 0, or the errno (unsupported(errno) = no such mode here).
    // only_fast: a block device's PUNCH_HOLE only, no ZERO_RANGE after it
    // (there the kernel may write the zeros: blkdev_fallocate without
    // BLKDEV_ZERO_NOFALLBACK).
    int zero_by_fallocate(std::uint64_t offset, std::uint64_t length, bool may_trim, bool only_fast = false);
    int discard_block_device(std::uint64_t offset, std::uint64_t length);
    // A shared hold of [offset, offset+length) in direct mode, none otherwise
    // (buffered writes have no read-modify-write to keep out).
    BlockGuard::Hold hold_shared(std::uint64_t offset, std::uint64_t length);

    int fd_ = -1;
    std::atomic<bool> told_gone_{false};        // deleted or replaced, warned
    std::atomic<bool> told_truncated_{false};   // shorter than size(), warned
    std::function<void(const std::string&)> on_storage_warning_;
    int sync_fd_ = -1;   // fd_ where the file could not be opened a second time
    std::atomic<int> storage_error_{0};
    std::function<void(const std::string&)> on_storage_failure_;
    std::string path_;
    std::atomic<std::uint64_t> size_ = 0;   // read by pool threads, changed by a reload
    bool size_from_storage_ = false;        // no size configured: a reload measures it again
    bool direct_ = false;
    bool cohorts_ = true;
    bool block_device_ = false;
    bool read_only_ = false;
    bool created_ = false;
    bool grown_ = false;
    std::uint64_t size_before_ = 0;          // an existing file's size before open grew it
    bool no_write_zeroes_ = false;           // a block device whose queue says it has no write-zeroes
    std::atomic<bool> nowait_works_{true};   // false once the kernel refuses RWF_NOWAIT
    std::uint32_t align_ = 4096;
    std::uint32_t optimal_io_ = 0;
    std::uint32_t max_io_ = 0;
    std::optional<bool> rotational_;
    BlockGuard guard_;                      // before uring_: its requests release holds as it closes
    std::unique_ptr<AsyncBackend> uring_;   // a FileUring: Options::io_uring and the kernel allowed it
    std::string io_uring_error_;
};

}   // namespace nbdsched::backend
