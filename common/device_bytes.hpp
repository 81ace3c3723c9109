// Copies into and out of the bytes of a RAM device's pages (and a socket's
// receive into them), which threads share the way a disk's sectors are
// shared. NBD lets a client have a READ and a WRITE of one range in flight
// at once (or two WRITEs), and lets the server serve them in any order
// (doc/proto.md, "Ordering of messages and writes"): on connections served
// by different event loops those copies run at the same time, and what the
// READ returns is then unspecified, as on a disk. They are the one race the
// data path has by design, so ThreadSanitizer is told to ignore these
// copies, and only them: page tables, pins, buffers and queues stay
// checked. (A copy into a page the arena has taken back is ASan's to
// report: the arena poisons its free pages.)
#pragma once

#include <cstddef>
#include <cstring>

#include "common/bytes.hpp"
#include "common/sanitizers.hpp"

#ifdef NBDSCHED_TSAN
// ThreadSanitizer's runtime defines these (compiler-rt, tsan_interface_ann).
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#endif

namespace nbdsched {

// While alive, this thread's memory accesses are not ThreadSanitizer's to
// check; a no-op in other builds.
class DeviceBytesAccess {
public:
#ifdef NBDSCHED_TSAN
    DeviceBytesAccess() {
        AnnotateIgnoreReadsBegin(__FILE__, __LINE__);
        AnnotateIgnoreWritesBegin(__FILE__, __LINE__);
    }
    ~DeviceBytesAccess() {
        AnnotateIgnoreWritesEnd(__FILE__, __LINE__);
        AnnotateIgnoreReadsEnd(__FILE__, __LINE__);
    }
#else
    // User-provided, so an unused-variable warning does not take it for dead.
    DeviceBytesAccess() {}
    ~DeviceBytesAccess() {}
#endif
    DeviceBytesAccess(const DeviceBytesAccess&) = delete;
    DeviceBytesAccess& operator=(const DeviceBytesAccess&) = delete;
};

// memcpy where `dst` or `src` is a device page.
inline void copy_device_bytes(void* dst, const void* src, std::size_t n) {
    DeviceBytesAccess access;
    std::memcpy(dst, src, n);
}

// memset to zero of part of a device page.
inline void zero_device_bytes(void* dst, std::size_t n) {
    DeviceBytesAccess access;
    std::memset(dst, 0, n);
}

// all_zero() of part of a device page.
inline bool device_bytes_zero(const std::byte* p, std::size_t n) {
    DeviceBytesAccess access;
    return all_zero(p, n);
}

}   // namespace nbdsched
