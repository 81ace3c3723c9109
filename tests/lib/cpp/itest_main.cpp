// main() of every doctest test that runs the real daemon: skips (exit 77)
// when the daemon is not available.
#include <cstdio>

#include "case_report.hpp"
#include "daemon.hpp"

int main(int argc, char** argv) {
    auto choice = nbdsched::testlib::server_choice();
    if (!choice.skip_reason.empty()) {
        std::printf("SKIP: %s\n", choice.skip_reason.c_str());
        return 77;
    }
    return nbdsched::testlib::run_doctest(argc, argv);
}
