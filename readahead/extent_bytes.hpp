// The bytes of one prefetched extent. Owns memory from any allocator, so the
// daemon hands its I/O buffer over to the cache instead of copying every
// prefetched byte once more.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace nbdsched::readahead {

class ExtentBytes {
public:
    ExtentBytes() = default;
    // Takes a vector's contents (tests, simple callers).
    ExtentBytes(std::vector<std::byte>&& bytes);   // NOLINT: implicit on purpose
    // Takes `size` bytes at `data`, a block of `capacity` bytes (what its
    // allocator handed out: the memory it holds), released with `release(data)`.
    ExtentBytes(std::byte* data, std::size_t size, std::size_t capacity, void (*release)(void*));

    const std::byte* data() const { return owner_.get(); }
    std::size_t size() const { return size_; }
    // The memory the bytes hold, at least size().
    std::size_t capacity() const { return capacity_; }

private:
    std::shared_ptr<std::byte> owner_;
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
};

}   // namespace nbdsched::readahead
