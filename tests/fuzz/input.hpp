// A tiny consumer of fuzz input bytes (libFuzzer's FuzzedDataProvider is a
// clang-only header; the corpus replay is also built with g++). Running out
// of bytes yields zeroes, so every input decodes to *some* event sequence.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace nbdsched::fuzz {

class Input {
public:
    Input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}

    bool empty() const { return pos_ >= size_; }
    std::size_t remaining() const { return size_ - pos_; }

    std::uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
    std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
    std::uint32_t u32() { return std::uint32_t(u16()) | (std::uint32_t(u16()) << 16); }
    std::uint64_t u64() { return std::uint64_t(u32()) | (std::uint64_t(u32()) << 32); }
    bool flag() { return u8() & 1; }
    // A value in [0, n) (n > 0).
    std::uint32_t below(std::uint32_t n) { return u32() % n; }

    // Up to `n` bytes, fewer at the end of the input.
    std::span<const std::uint8_t> bytes(std::size_t n) {
        if (n > remaining()) n = remaining();
        std::span<const std::uint8_t> s(data_ + pos_, n);
        pos_ += n;
        return s;
    }

private:
    const std::uint8_t* data_;
    std::size_t size_;
    std::size_t pos_ = 0;
};

}   // namespace nbdsched::fuzz
