// Which sanitizer this translation unit is built with. g++ defines
// __SANITIZE_ADDRESS__, clang answers through __has_feature: one place asks
// both, so code and tests work under either compiler.
#pragma once

#if defined(__SANITIZE_ADDRESS__)
#define NBDSCHED_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define NBDSCHED_ASAN 1
#endif
#endif

#if defined(__SANITIZE_THREAD__)
#define NBDSCHED_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NBDSCHED_TSAN 1
#endif
#endif

// Poisons memory a pool keeps for reuse, so ASan reports a use after free
// of it although it was never freed; no-ops without ASan.
#ifdef NBDSCHED_ASAN
#include <sanitizer/asan_interface.h>
#define NBDSCHED_POISON(p, n) ASAN_POISON_MEMORY_REGION(p, n)
#define NBDSCHED_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION(p, n)
#else
#define NBDSCHED_POISON(p, n) ((void)(p), (void)(n))
#define NBDSCHED_UNPOISON(p, n) ((void)(p), (void)(n))
#endif
