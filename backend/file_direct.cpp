// O_DIRECT requests that are not aligned to the device's logical block (or
// whose buffer is not): bounce through an aligned buffer covering the
// enclosing aligned range.
#include <cstring>

#include "backend/file_backend.hpp"
#include "backend/file_io.hpp"

namespace nbdsched::backend {

namespace {

struct AlignedRange {
    std::uint64_t start;
    std::uint64_t end;
    std::uint64_t length() const { return end - start; }
};

AlignedRange enclosing(std::uint64_t offset, std::uint64_t length, std::uint64_t align) {
    return {offset / align * align, (offset + length + align - 1) / align * align};
}

}   // namespace

int FileBackend::direct_read(std::uint64_t offset, std::span<std::byte> out) {
    const AlignedRange r = enclosing(offset, out.size(), align_);
    AlignedBuffer bounce(r.length(), align_);
    if (!bounce)
        return ENOMEM;
    if (int err = pread_full(fd_, bounce.span(), r.start))
        return err;
    std::memcpy(out.data(), bounce.data() + (offset - r.start), out.size());
    return 0;
}

int FileBackend::direct_write(std::uint64_t offset, std::span<const std::byte> data, bool fua, bool* sync_failed) {
    const AlignedRange r = enclosing(offset, data.size(), align_);
    AlignedBuffer bounce(r.length(), align_);
    if (!bounce)
        return ENOMEM;
    const std::uint64_t end = offset + data.size();
    // Partial head/tail blocks are read-modify-written: hold the whole range
    // from the read to the write, so that no other write, zero or trim of
    // these blocks (nor another read-modify-write of them) lands in between
    // and is overwritten with the bytes read before it.
    auto hold = guard_.exclusive(r.start, r.end);
    if (offset != r.start) {
        if (int err = pread_full(fd_, bounce.span().first(align_), r.start))
            return err;
    }
    const bool tail_separate = r.end - align_ != r.start || offset == r.start;
    if (end != r.end && tail_separate) {
        if (int err = pread_full(fd_, bounce.span().last(align_), r.end - align_))
            return err;
    }
    std::memcpy(bounce.data() + (offset - r.start), data.data(), data.size());
    return pwrite_full(fd_, {bounce.data(), bounce.size()}, r.start, fua, sync_failed);
}

}   // namespace nbdsched::backend
