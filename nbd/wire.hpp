// Big-endian (network order) loads and stores over raw bytes. The protocol
// code never casts packed structs onto buffers: alignment and byte order are
// explicit here, so every decoder works on any byte span (and fuzzes cleanly).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace nbdsched::nbd {

inline std::uint16_t load_u16(const std::uint8_t* p) {
    return static_cast<std::uint16_t>((p[0] << 8) | p[1]);
}
inline std::uint32_t load_u32(const std::uint8_t* p) {
    return (std::uint32_t(p[0]) << 24) | (std::uint32_t(p[1]) << 16) |
           (std::uint32_t(p[2]) << 8) | std::uint32_t(p[3]);
}
inline std::uint64_t load_u64(const std::uint8_t* p) {
    return (std::uint64_t(load_u32(p)) << 32) | load_u32(p + 4);
}

inline void store_u16(std::uint8_t* p, std::uint16_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 8);
    p[1] = static_cast<std::uint8_t>(v);
}
inline void store_u32(std::uint8_t* p, std::uint32_t v) {
    p[0] = static_cast<std::uint8_t>(v >> 24);
    p[1] = static_cast<std::uint8_t>(v >> 16);
    p[2] = static_cast<std::uint8_t>(v >> 8);
    p[3] = static_cast<std::uint8_t>(v);
}
inline void store_u64(std::uint8_t* p, std::uint64_t v) {
    store_u32(p, static_cast<std::uint32_t>(v >> 32));
    store_u32(p + 4, static_cast<std::uint32_t>(v));
}

// Appending writer for variable-length handshake messages.
class Writer {
public:
    explicit Writer(std::vector<std::uint8_t>& out) : out_(out) {}
    void u16(std::uint16_t v) {
        grow(2, [&](std::uint8_t* p) { store_u16(p, v); });
    }
    void u32(std::uint32_t v) {
        grow(4, [&](std::uint8_t* p) { store_u32(p, v); });
    }
    void u64(std::uint64_t v) {
        grow(8, [&](std::uint8_t* p) { store_u64(p, v); });
    }
    void bytes(std::string_view s) { out_.insert(out_.end(), s.begin(), s.end()); }
    void zeroes(std::size_t n) { out_.insert(out_.end(), n, 0); }

private:
    template <class F>
    void grow(std::size_t n, F&& f) {
        auto at = out_.size();
        out_.resize(at + n);
        f(out_.data() + at);
    }
    std::vector<std::uint8_t>& out_;
};

// Bounds-checked reader for variable-length option payloads: every get
// reports whether enough bytes were left, so truncated input is an error
// value, never an overread.
class Reader {
public:
    explicit Reader(std::span<const std::uint8_t> in) : in_(in) {}
    bool u16(std::uint16_t& v) {
        return take(2, [&](const std::uint8_t* p) { v = load_u16(p); });
    }
    bool u32(std::uint32_t& v) {
        return take(4, [&](const std::uint8_t* p) { v = load_u32(p); });
    }
    bool string(std::size_t n, std::string_view& s) {
        return take(n, [&](const std::uint8_t* p) { s = {reinterpret_cast<const char*>(p), n}; });
    }
    std::size_t remaining() const { return in_.size() - pos_; }

private:
    template <class F>
    bool take(std::size_t n, F&& f) {
        if (remaining() < n) return false;
        f(in_.data() + pos_);
        pos_ += n;
        return true;
    }
    std::span<const std::uint8_t> in_;
    std::size_t pos_ = 0;
};

}   // namespace nbdsched::nbd
