#include "daemon/process/heap_tuning.hpp"

#include <cstdlib>
#include <malloc.h>
#include <mutex>

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
    // Every loop's release timer starts at the same moment with the same
    // period, so two loops often get here together: without the lock one
    // could raise the threshold again before the other's probe is freed,
    // and that loop's arena would keep its top.
    static std::mutex one_at_a_time;
    std::lock_guard lock(one_at_a_time);
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
