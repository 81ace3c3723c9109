// Positional I/O helpers for the file backend: loops that survive EINTR and
// short transfers, and an aligned buffer for O_DIRECT bounce copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>

namespace nbdsched::backend {

// Reads exactly out.size() bytes at offset. Bytes past end-of-file read as
// zeros (a file shorter than the device, e.g. truncated behind our back).
// Returns 0 or an errno.
int pread_full(int fd, std::span<std::byte> out, std::uint64_t offset);

// Reads out.size() bytes at offset only if the page cache holds them all
// (preadv2 RWF_NOWAIT): 0 when read, EAGAIN when the read would have to wait
// for the disk (or came back short), EOPNOTSUPP where the kernel or
// filesystem lacks the flag, or another errno.
int pread_cached(int fd, std::span<std::byte> out, std::uint64_t offset);

// Writes all of data at offset. dsync: RWF_DSYNC via pwritev2 (the data is
// durable when it returns), falling back to pwrite + fdatasync where the
// kernel or filesystem refuses the flag. Returns 0 or an errno;
// *sync_failed (when given) is set when that errno is the fdatasync's.
int pwrite_full(int fd, std::span<const std::byte> data, std::uint64_t offset, bool dsync,
                bool* sync_failed = nullptr);

// A heap buffer aligned for O_DIRECT (memory alignment `align`, a power of 2).
class AlignedBuffer {
public:
    // zeroed: clear it (bounce buffers that are overwritten need not be).
    AlignedBuffer(std::size_t size, std::size_t align, bool zeroed = false);
    std::byte* data() const { return data_.get(); }
    std::size_t size() const { return size_; }
    std::span<std::byte> span() const { return {data_.get(), size_}; }
    explicit operator bool() const { return data_ != nullptr; }

private:
    struct Free {
        void operator()(std::byte* p) const;
    };
    std::unique_ptr<std::byte, Free> data_;
    std::size_t size_;
};

}   // namespace nbdsched::backend
