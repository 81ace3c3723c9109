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
