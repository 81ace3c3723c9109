// What a doctest executable reports beyond pass/fail:
//   - skips: a case that cannot run here calls SKIP_TEST(reason); the line
//     "SKIP: <case>: <reason>" is printed and, when no case failed, the
//     executable exits 77 so meson counts it as skipped (never as passed);
//   - case logs: text (a daemon's log) printed only if the current case fails.
// Every doctest executable's main() calls run_doctest().
#pragma once

#include <string>
#include <vector>

namespace nbdsched::testlib {

// Records that the current test case cannot run here, and prints why.
void record_skip(const std::string& reason);
// "<case>: <reason>" of every skip so far.
const std::vector<std::string>& skips();

// Printed after the current case if it fails.
void remember_case_log(const std::string& text);

// Runs the registered cases; 77 when some case skipped and none failed.
int run_doctest(int argc, char** argv);

}   // namespace nbdsched::testlib

// Leaves the current test case as skipped (in the case's own body).
#define SKIP_TEST(reason)                         \
    do {                                          \
        ::nbdsched::testlib::record_skip(reason); \
        return;                                   \
    } while (0)

// Leaves the current test case as skipped when `reason` (a string
// expression, evaluated once) is not empty.
#define SKIP_TEST_IF(reason)                     \
    do {                                         \
        if (auto why_ = (reason); !why_.empty()) \
            SKIP_TEST(why_);                     \
    } while (0)
