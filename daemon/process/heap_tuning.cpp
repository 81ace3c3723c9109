#include "daemon/process/heap_tuning.hpp"

#include <cstdlib>
#include <malloc.h>

namespace nbdsched::daemon {

namespace {
constexpr int mmap_threshold = 64 << 20;
constexpr int trim_threshold = 128 << 20;
// free() trims a thread arena's top only for a chunk this large or larger
// (glibc's FASTBIN_CONSOLIDATION_THRESHOLD, 64 KiB).
constexpr std::size_t trim_probe = 128 << 10;
}   // namespace

void keep_large_buffers_mapped() {
    mallopt(M_MMAP_THRESHOLD, mmap_threshold);
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
}

void return_free_memory() {
    malloc_trim(0);
    // A thread arena's top shrinks only inside free(), and only past the
    // trim threshold: lowered for one free() of a block from this thread's
    // arena. Another thread freeing meanwhile trims its arena too, which
    // is harmless.
    mallopt(M_TRIM_THRESHOLD, 0);
    void* probe = std::malloc(trim_probe);
    asm volatile(""
                 :
                 : "r"(probe)
                 : "memory");   // the compiler may not drop the pair
    std::free(probe);
    mallopt(M_TRIM_THRESHOLD, trim_threshold);
}

}   // namespace nbdsched::daemon
