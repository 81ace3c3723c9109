#include "backend/file_io.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/uio.h>
#include <unistd.h>

namespace nbdsched::backend {

int pread_full(int fd, std::span<std::byte> out, std::uint64_t offset) {
    std::size_t done = 0;
    while (done < out.size()) {
        const ssize_t n = ::pread(fd, out.data() + done, out.size() - done, static_cast<off_t>(offset + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0) {   // end of file: the rest is a hole as far as we are concerned
            std::memset(out.data() + done, 0, out.size() - done);
            return 0;
        }
        done += static_cast<std::size_t>(n);
    }
    return 0;
}

int pread_cached(int fd, std::span<std::byte> out, std::uint64_t offset) {
    ::iovec iov{out.data(), out.size()};
    ssize_t n;
    do {
        n = ::preadv2(fd, &iov, 1, static_cast<off_t>(offset), RWF_NOWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0)
        return errno == EWOULDBLOCK ? EAGAIN : errno;
    // Short: part of the range is not cached, or end of file (a file shorter
    // than the device); the blocking path handles both.
    return static_cast<std::size_t>(n) == out.size() ? 0 : EAGAIN;
}

namespace {

// pwritev2 with RWF_DSYNC; -1 with errno set on failure.
ssize_t pwrite_dsync(int fd, const std::byte* p, std::size_t n, std::uint64_t offset) {
    iovec iov{const_cast<std::byte*>(p), n};
    return ::pwritev2(fd, &iov, 1, static_cast<off_t>(offset), RWF_DSYNC);
}

}   // namespace

int pwrite_full(int fd, std::span<const std::byte> data, std::uint64_t offset, bool dsync, bool* sync_failed) {
    bool sync_after = false;
    std::size_t done = 0;
    while (done < data.size()) {
        const std::byte* p = data.data() + done;
        const std::size_t left = data.size() - done;
        const off_t at = static_cast<off_t>(offset + done);
        ssize_t n = dsync && !sync_after ? pwrite_dsync(fd, p, left, offset + done) : ::pwrite(fd, p, left, at);
        if (n < 0 && dsync && !sync_after && (errno == EOPNOTSUPP || errno == ENOSYS)) {
            sync_after = true;   // no RWF_DSYNC here: write, then fdatasync below
            continue;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno;
        }
        if (n == 0)
            return EIO;   // a zero-byte write would loop forever
        done += static_cast<std::size_t>(n);
    }
    if (sync_after && ::fdatasync(fd) != 0) {
        if (sync_failed) *sync_failed = true;
        return errno;
    }
    return 0;
}

AlignedBuffer::AlignedBuffer(std::size_t size, std::size_t align, bool zeroed)
    : size_(size) {
    void* p = nullptr;
    if (::posix_memalign(&p, align, std::max<std::size_t>(size, 1)) == 0) {
        if (zeroed)
            std::memset(p, 0, size);
        data_.reset(static_cast<std::byte*>(p));
    }
}

void AlignedBuffer::Free::operator()(std::byte* p) const {
    std::free(p);
}

}   // namespace nbdsched::backend
