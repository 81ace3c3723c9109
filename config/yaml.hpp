// yaml-cpp, included through here only: g++ 12 reports a false positive
// -Wdangling-pointer inside yaml-cpp 0.7's node/impl.h (its iterator proxies
// hold temporaries the analysis cannot see through). The pragma covers the
// library's lines only, so our own code keeps the warning.
#pragma once

#pragma GCC diagnostic push
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 12
#pragma GCC diagnostic ignored "-Wdangling-pointer"
#endif
#include <yaml-cpp/yaml.h>
#pragma GCC diagnostic pop
