#include "backend/file_backend.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <linux/falloc.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "backend/file_io.hpp"
#ifdef NBDSCHED_HAVE_IO_URING
#include "backend/file_uring.hpp"
#endif
#include "backend/sysfs_queue.hpp"
#include "common/units.hpp"

namespace nbdsched::backend {

namespace {

std::string sys_error(const std::string& what, const std::string& path, int err) {
    return what + " " + path + ": " + std::strerror(err);
}

// Errors that mean "this fallocate mode is not available here".
bool unsupported(int err) {
    return err == EOPNOTSUPP || err == EINVAL || err == ENODEV || err == ENOTTY || err == ENOSYS;
}

}   // namespace

std::unique_ptr<FileBackend> FileBackend::open(const Options& options, std::string& error) {
    struct stat st {};
    const bool exists = ::stat(options.path.c_str(), &st) == 0;
    if (!exists && errno != ENOENT) {
        error = sys_error("stat", options.path, errno);
        return nullptr;
    }
    if (!exists && options.size == 0) {
        error = options.path + ": does not exist and no size is configured to create it";
        return nullptr;
    }
    std::unique_ptr<FileBackend> b(new FileBackend);
    b->path_ = options.path;
    b->direct_ = options.direct;
    b->cohorts_ = options.io_cohorts;
    b->created_ = !exists;
    const int direct_flag = options.direct ? O_DIRECT : 0;
    int flags = O_RDWR | O_CLOEXEC | direct_flag | (exists ? 0 : O_CREAT | O_EXCL);
    b->fd_ = ::open(options.path.c_str(), flags, 0600);
    if (b->fd_ < 0 && exists && (errno == EACCES || errno == EROFS || errno == EPERM)) {
        b->read_only_ = true;
        b->fd_ = ::open(options.path.c_str(), O_RDONLY | O_CLOEXEC | direct_flag);
    }
    if (b->fd_ < 0) {
        if (errno == EINVAL && options.direct) {
            error = options.path + ": O_DIRECT is not supported by this filesystem (set direct: false)";
            if (!exists)   // O_CREAT created it before O_DIRECT was refused
                ::unlink(options.path.c_str());
        } else {
            error = sys_error("open", options.path, errno);
        }
        return nullptr;
    }
    if (!b->finish_open(options, st, error)) {
        if (b->created_)
            ::unlink(options.path.c_str());
        return nullptr;
    }
    b->on_storage_failure_ = options.on_storage_failure;
    b->on_storage_warning_ = options.on_storage_warning;
    b->open_sync_fd();
    if (options.io_uring)
        b->open_ring();
    return b;
}

// Its own open file description, so that its errseq cursor moves only with
// FLUSH (see the header). Through /proc (the same inode even if the path
// changed since), else the path checked to be the same file; failing both,
// FLUSH syncs fd_ (what it did before there was a second one).
void FileBackend::open_sync_fd() {
    sync_fd_ = fd_;
    if (read_only_) return;
    struct stat mine {};
    struct stat other {};
    if (::fstat(fd_, &mine) != 0) return;
    int fd = ::open(("/proc/self/fd/" + std::to_string(fd_)).c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    if (::fstat(fd, &other) != 0 || other.st_dev != mine.st_dev || other.st_ino != mine.st_ino ||
        other.st_rdev != mine.st_rdev) {
        ::close(fd);
        return;
    }
    sync_fd_ = fd;
}

int FileBackend::storage_failed(int err, const char* what) {
    int none = 0;
    if (err == 0 || !storage_error_.compare_exchange_strong(none, err, std::memory_order_acq_rel)) return err;
    if (on_storage_failure_)
        on_storage_failure_(std::string("the storage failed to write acknowledged data (") + what + ": " +
                            std::strerror(err) +
                            "); FLUSH and FUA requests fail with EIO from now on, and the daemon exits 1: check "
                            "the storage, then restart (data written since the last successful FLUSH may be lost)");
    return err;
}

#ifdef NBDSCHED_HAVE_IO_URING
void FileBackend::open_ring() {
    uring_ = FileUring::open(*this, io_uring_error_);
}

AsyncBackend* FileBackend::async() {
    return uring_.get();
}
#else
void FileBackend::open_ring() {
    io_uring_error_ = "io_uring is not built into this nbdsched (meson -Dio_uring=enabled, liburing-dev)";
}

AsyncBackend* FileBackend::async() {
    return nullptr;
}
#endif

bool FileBackend::finish_open(const Options& options, struct stat& st, std::string& error) {
    FileBackend* b = this;
    if (::fstat(b->fd_, &st) != 0) {
        error = sys_error("fstat", options.path, errno);
        return false;
    }
    std::uint64_t actual = 0;
    if (S_ISBLK(st.st_mode)) {
        b->block_device_ = true;
        int lbs = 0;
        if (::ioctl(b->fd_, BLKGETSIZE64, &actual) != 0 || ::ioctl(b->fd_, BLKSSZGET, &lbs) != 0) {
            error = sys_error("ioctl(BLKGETSIZE64)", options.path, errno);
            return false;
        }
        b->align_ = static_cast<std::uint32_t>(lbs > 512 ? lbs : 512);
    } else if (S_ISREG(st.st_mode)) {
        actual = static_cast<std::uint64_t>(st.st_size);
    } else {
        error = options.path + ": not a regular file or block device";
        return false;
    }

    b->size_ = options.size == 0 ? actual : options.size;
    b->size_from_storage_ = options.size == 0;
    if (b->size_ == 0) {
        error = options.path + ": is empty; configure a size to grow it";
        return false;
    }
    if (actual > options.size && options.size != 0 && !b->block_device_) {
        error = options.path + ": file is " + format_size(actual) + ", larger than the configured size " + format_size(options.size) + " (set size: 0 to use the file's size)";
        return false;
    }
    if (b->size_ > actual && b->block_device_) {
        error = options.path + ": block device is " + format_size(actual) + ", smaller than the configured size " + format_size(b->size_);
        return false;
    }
    if (b->direct_ && b->size_ % b->align_ != 0) {
        error = options.path + ": size " + std::to_string(b->size_) + " is not a multiple of " + std::to_string(b->align_) + " as O_DIRECT needs";
        return false;
    }
    if (auto q = queue_info_for_path(options.path)) {
        b->rotational_ = q->rotational;
        b->optimal_io_ = q->optimal_io_bytes;
        b->max_io_ = q->max_io_bytes;
        b->no_write_zeroes_ = b->block_device_ && q->write_zeroes == false;
    }
    // Last: a start refused by a check above leaves an existing file as it was.
    if (b->size_ > actual) {
        if (b->read_only_ || ::ftruncate(b->fd_, static_cast<off_t>(b->size_)) != 0) {
            const int err = b->read_only_ ? EROFS : errno;
            error = sys_error("ftruncate (grow to " + format_size(b->size_) + ")", options.path, err);
            if (err == EFBIG)
                error += " (over the process's file size limit, ulimit -f or systemd LimitFSIZE=, or the largest file the filesystem holds)";
            return false;
        }
        b->grown_ = !b->created_;
        b->size_before_ = actual;
    }
    return true;
}

// Only bytes nobody wrote are given back: the part grown (or the whole
// created file) must hold no data, which SEEK_DATA tells without reading
// it (a file system without it reports data everywhere, and the file
// stays). A process serving the same file meanwhile (the old daemon of a
// --takeover, whose size is at most the file's before the growth) never
// writes there; a size from the storage that a reload read could.
std::string FileBackend::undo_open() {
    if (!created_ && !grown_) return "";
    const bool created = std::exchange(created_, false);
    grown_ = false;
    const auto from = created ? 0 : size_before_;
    struct stat mine {};
    if (::fstat(fd_, &mine) != 0) return sys_error("fstat", path_, errno) + ": left as it is";
    if (static_cast<std::uint64_t>(mine.st_size) != size_)
        return path_ + ": left at " + format_size(static_cast<std::uint64_t>(mine.st_size)) +
               " (its size changed since the start grew it to " + format_size(size_) + ")";
    const off_t data = ::lseek(fd_, static_cast<off_t>(from), SEEK_DATA);
    if (data >= 0 || errno != ENXIO)
        return path_ + ": left at " + format_size(size_) + " (" +
               (data >= 0 ? "data was written past " + format_size(from) + " since it was grown"
                          : "cannot tell whether data was written to it: " + std::string(std::strerror(errno))) +
               ")";
    if (created) {
        struct stat named {};
        if (::stat(path_.c_str(), &named) != 0 || named.st_dev != mine.st_dev || named.st_ino != mine.st_ino)
            return path_ + ": created for this start, left (the path names another file now)";
        if (::unlink(path_.c_str()) != 0) return sys_error("unlink", path_, errno);
        return path_ + ": removed (created for this start)";
    }
    if (::ftruncate(fd_, static_cast<off_t>(size_before_)) != 0)
        return sys_error("ftruncate (shrink back to " + format_size(size_before_) + ")", path_, errno);
    return path_ + ": shrunk back to " + format_size(size_before_) + " (grown to " + format_size(size_) +
           " for this start)";
}

void FileBackend::check_still_there() {
    if (block_device_ || !on_storage_warning_ || (told_gone_.load() && told_truncated_.load())) return;
    struct stat mine {};
    struct stat named {};
    if (::fstat(fd_, &mine) != 0) return;
    // A replacement (rename over it) drops the last link too: the path tells them apart.
    const bool named_exists = ::stat(path_.c_str(), &named) == 0;
    const bool deleted = mine.st_nlink == 0 && !named_exists;
    const bool replaced = !deleted && (!named_exists || named.st_dev != mine.st_dev || named.st_ino != mine.st_ino);
    if ((deleted || replaced) && !told_gone_.exchange(true))
        on_storage_warning_("its file " + path_ +
                            (deleted ? " was deleted" : " was replaced or moved (the path names another file now)") +
                            " while it is served: reads and writes go on into the file the daemon holds open, "
                            "which the next start will not find (data written since is lost then); restore "
                            "the file or stop the clients");
    const auto actual = static_cast<std::uint64_t>(mine.st_size);
    if (!size_from_storage_ && actual < size() && !told_truncated_.exchange(true))
        on_storage_warning_("its file " + path_ + " was truncated behind the daemon's back to " +
                            format_size(actual) + " (the device is " + format_size(size()) +
                            "): what was past its end reads as zeros now");
}

int FileBackend::refresh_size() {
    check_still_there();
    if (!size_from_storage_) return 0;
    std::uint64_t actual = 0;
    struct stat st {};
    if (block_device_ ? ::ioctl(fd_, BLKGETSIZE64, &actual) != 0 : ::fstat(fd_, &st) != 0) return errno;
    if (!block_device_) actual = static_cast<std::uint64_t>(st.st_size);
    if (direct_) actual -= actual % align_;
    if (actual == 0) return EINVAL;   // emptied: nothing to serve, keep the old bound
    size_.store(actual, std::memory_order_relaxed);
    return 0;
}

FileBackend::~FileBackend() {
    uring_.reset();   // waits for its requests, which use fd_
    if (sync_fd_ >= 0 && sync_fd_ != fd_)
        ::close(sync_fd_);
    if (fd_ >= 0)
        ::close(fd_);
}

std::string FileBackend::describe() const {
    std::string d = (block_device_ ? "block " : "file ") + path_ + " " + format_size(size());
    if (direct_)
        d += " (O_DIRECT)";
    if (read_only_)
        d += " (read-only)";
    if (uring_)
        d += " (io_uring)";
    return d;
}

bool FileBackend::in_range(std::uint64_t offset, std::uint64_t length) const {
    const std::uint64_t size = this->size();
    return offset <= size && length <= size - offset;
}

bool FileBackend::aligned(std::uint64_t offset, std::uint64_t length, const void* buffer) const {
    const std::uint64_t mask = align_ - 1;
    return (offset & mask) == 0 && (length & mask) == 0 && (reinterpret_cast<std::uintptr_t>(buffer) & mask) == 0;
}

BlockGuard::Hold FileBackend::hold_shared(std::uint64_t offset, std::uint64_t length) {
    if (!direct_) return {};
    return guard_.shared(offset, offset + length);
}

int FileBackend::check_mutation(std::uint64_t offset, std::uint64_t length) const {
    if (!in_range(offset, length))
        return EINVAL;
    return read_only_ ? EROFS : 0;
}

int FileBackend::read(std::uint64_t offset, std::span<std::byte> out) {
    if (!in_range(offset, out.size()))
        return EINVAL;
    if (direct_ && !aligned(offset, out.size(), out.data()))
        return direct_read(offset, out);
    return pread_full(fd_, out, offset);
}

std::optional<int> FileBackend::read_if_cached(std::uint64_t offset, std::span<std::byte> out) {
    if (direct_ || out.size() > kCachedReadMax || !nowait_works_.load(std::memory_order_relaxed) ||
        !in_range(offset, out.size()))
        return std::nullopt;
    const int err = pread_cached(fd_, out, offset);
    if (err == EOPNOTSUPP || err == EINVAL) {   // no RWF_NOWAIT here: stop trying
        nowait_works_.store(false, std::memory_order_relaxed);
        return std::nullopt;
    }
    if (err == EAGAIN)
        return std::nullopt;
    return err;
}

int FileBackend::write(std::uint64_t offset, std::span<const std::byte> data, bool fua) {
    if (int err = check_mutation(offset, data.size()))
        return err;
    if (fua && storage_error() != 0)
        return EIO;
    int err;
    bool sync_failed = false;
    if (direct_ && !aligned(offset, data.size(), data.data())) {
        err = direct_write(offset, data, fua, &sync_failed);
    } else {
        auto hold = hold_shared(offset, data.size());
        err = pwrite_full(fd_, data, offset, fua, &sync_failed);
    }
    if (sync_failed) return storage_failed(err, "fdatasync after a FUA write");
    // EIO from RWF_DSYNC may be the writeback of earlier writes, reported
    // here and no more on fd_. ENOSPC is left to the next FLUSH (sync_fd_):
    // it is as often a plain allocation failure that lost nothing.
    return fua && err == EIO ? storage_failed(err, "FUA write") : err;
}

int FileBackend::flush() {
    if (read_only_)
        return 0;
    if (storage_error() != 0)
        return EIO;
    if (::fdatasync(sync_fd_) != 0)
        return storage_failed(errno, "fdatasync");
    check_still_there();
    return 0;
}

int FileBackend::discard_block_device(std::uint64_t offset, std::uint64_t length) {
    // BLKDISCARD wants logical-block alignment: discard the aligned middle,
    // the partial ends stay as they are (TRIM is only a hint).
    const std::uint64_t start = (offset + align_ - 1) / align_ * align_;
    const std::uint64_t end = (offset + length) / align_ * align_;
    if (end <= start)
        return 0;
    std::uint64_t range[2] = {start, end - start};
    if (::ioctl(fd_, BLKDISCARD, &range) != 0 && !unsupported(errno))
        return errno;
    return 0;
}

int FileBackend::trim(std::uint64_t offset, std::uint64_t length, bool fua) {
    if (int err = check_mutation(offset, length); err != 0 || length == 0)
        return err;
    int err = 0;
    {
        auto hold = hold_shared(offset, length);
        if (block_device_)
            err = discard_block_device(offset, length);
        else if (::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                             static_cast<off_t>(length)) != 0 &&
                 !unsupported(errno))
            err = errno;
    }
    if (err == 0 && fua)
        return flush();
    return err;
}

int FileBackend::zero_by_fallocate(std::uint64_t offset, std::uint64_t length, bool may_trim, bool only_fast) {
    auto hold = hold_shared(offset, length);
    const off_t off = static_cast<off_t>(offset);
    const off_t len = static_cast<off_t>(length);
    int rc = -1;
    if (may_trim) {
        rc = ::fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, len);
        if (rc != 0 && (!unsupported(errno) || (only_fast && block_device_)))
            return errno;
    }
    if (rc != 0)
        rc = ::fallocate(fd_, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, off, len);
    return rc == 0 ? 0 : errno;
}

int FileBackend::write_zeroes(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) {
    if (int err = check_mutation(offset, length); err != 0 || length == 0)
        return err;
    const int err = zero_by_fallocate(offset, length, may_trim);
    if (err != 0 && !unsupported(err))
        return err;
    if (err == 0)
        return fua ? flush() : 0;
    return zero_fill(offset, length, fua);
}

int FileBackend::write_zeroes_fast(std::uint64_t offset, std::uint64_t length, bool may_trim, bool fua) {
    if (int err = check_mutation(offset, length); err != 0 || length == 0)
        return err;
    // A block device that cannot zero without writing is not asked: a
    // PUNCH_HOLE there drops the range's dirty page cache before it fails
    // (blkdev_fallocate: truncate_bdev_range, then the zeroout), and
    // FAST_ZERO must leave the data alone when it fails.
    if (block_device_ && (!may_trim || no_write_zeroes_))
        return ENOTSUP;
    const int err = zero_by_fallocate(offset, length, may_trim, true);
    if (err != 0)
        return unsupported(err) ? ENOTSUP : err;
    return fua ? flush() : 0;
}

int FileBackend::zero_fill(std::uint64_t offset, std::uint64_t length, bool fua) {
    // Through write() so O_DIRECT alignment and partial blocks are handled.
    constexpr std::size_t chunk = 1 << 20;
    static const AlignedBuffer zeros(chunk, 4096, true);
    for (std::uint64_t done = 0; done < length;) {
        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(chunk, length - done));
        if (int err = write(offset + done, {zeros.data(), n}, false))
            return err;
        done += n;
    }
    return fua ? flush() : 0;
}

int FileBackend::extents(std::uint64_t offset, std::uint64_t length, ExtentList& out) {
    if (!in_range(offset, length))
        return EINVAL;
    const std::uint64_t end = offset + length;
    for (std::uint64_t pos = offset; pos < end;) {
        const off_t data = ::lseek(fd_, static_cast<off_t>(pos), SEEK_DATA);
        if (data < 0 && errno == ENXIO)   // no data from here to the end of the file
            return out.add(end - pos, true), 0;
        if (data < 0)   // no SEEK_DATA here (EINVAL on block devices): data
            return out.add(end - pos, false), 0;
        const std::uint64_t data_at = std::min<std::uint64_t>(static_cast<std::uint64_t>(data), end);
        if (!out.add(data_at - pos, true))
            return 0;
        pos = data_at;
        if (pos == end)
            break;
        const off_t hole = ::lseek(fd_, static_cast<off_t>(pos), SEEK_HOLE);
        const std::uint64_t hole_at = hole < 0 ? end : std::min<std::uint64_t>(static_cast<std::uint64_t>(hole), end);
        if (!out.add(hole_at - pos, false))
            return 0;
        pos = hole_at;
    }
    return 0;
}

int FileBackend::cache(std::uint64_t offset, std::uint64_t length) {
    if (!in_range(offset, length))
        return EINVAL;
    if (direct_)   // O_DIRECT reads never use the page cache
        return 0;
    return ::posix_fadvise(fd_, static_cast<off_t>(offset), static_cast<off_t>(length), POSIX_FADV_WILLNEED);
}

}   // namespace nbdsched::backend
