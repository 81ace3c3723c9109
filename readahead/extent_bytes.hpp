// The bytes of one prefetched extent. Owns memory from any allocator, so the
// daemon hands its I/O buffer over to the cache instead of copying every
// prefetched byte once more, and takes it back for its next prefetch when
// the extent goes (nothing is allocated to own it: a shared_ptr's control
// block was one allocation per prefetch).
#pragma once

#include <cstddef>
#include <vector>

namespace nbdsched::readahead {

class ExtentBytes {
public:
    // Gives a block back to its allocator: the block and its capacity.
    using Release = void (*)(std::byte* block, std::size_t capacity);

    ExtentBytes() = default;
    // Takes a vector's contents (tests, simple callers).
    ExtentBytes(std::vector<std::byte>&& bytes);   // NOLINT: implicit on purpose
    // Takes `size` bytes at `data`, a block of `capacity` bytes (what its
    // allocator handed out: the memory it holds), released with
    // `release(data, capacity)`.
    ExtentBytes(std::byte* data, std::size_t size, std::size_t capacity, Release release);
    ExtentBytes(ExtentBytes&& other) noexcept;
    ExtentBytes& operator=(ExtentBytes&& other) noexcept;
    ExtentBytes(const ExtentBytes&) = delete;
    ExtentBytes& operator=(const ExtentBytes&) = delete;
    ~ExtentBytes();

    const std::byte* data() const { return data_; }
    std::size_t size() const { return size_; }
    // The memory the bytes hold, at least size().
    std::size_t capacity() const { return capacity_; }

private:
    void reset();

    std::vector<std::byte> vector_;   // the bytes, when given as a vector
    std::byte* data_ = nullptr;       // into vector_ or a block to release
    std::size_t size_ = 0;
    std::size_t capacity_ = 0;
    Release release_ = nullptr;   // null: vector_ owns data_ (or nothing does)
};

}   // namespace nbdsched::readahead
