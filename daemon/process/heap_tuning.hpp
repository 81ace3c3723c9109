// How the daemon's heap keeps and returns large buffers (glibc malloc).
#pragma once

namespace nbdsched::daemon {

// Request, prefetch and read-ahead buffers are up to 32 MiB and live for one
// request or one cache extent. glibc serves such sizes with a fresh mmap each
// time, and every page of it then faults on first touch: with read-ahead on a
// page-cached file that made 1 MiB sequential reads 8x slower (bench exp8).
// From the heap they are reused, already mapped. The trim threshold keeps
// freed buffers mapped up to about the read-ahead cache's size. Once, at
// start, before any other thread runs.
void keep_large_buffers_mapped();

// Returns the heap's free memory to the system: free pages inside every
// arena, the top of the main arena, and the top of the calling thread's
// arena, which malloc_trim() leaves alone (the high trim threshold above
// keeps it mapped). An event loop other than loop 0 allocates from an arena
// of its own, so without the last step a burst's buffers stayed resident
// there (tens of MiB) after the pool had freed them.
void return_free_memory();

}   // namespace nbdsched::daemon
