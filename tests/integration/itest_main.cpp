// main() of every doctest integration test: skips (exit 77) when the daemon is
// not available, and prints the daemon logs of a failed test case.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>

#include "harness.hpp"

namespace {

struct DaemonLogListener : doctest::IReporter {
    explicit DaemonLogListener(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData&) override {
        nbdsched::itest::take_logs();
    }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats& st) override {
        auto logs = nbdsched::itest::take_logs();
        if (st.testCaseSuccess) return;
        for (const auto& log : logs)
            std::fprintf(stderr, "----- daemon log -----\n%s----- end of daemon log -----\n",
                         log.c_str());
    }
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

} // namespace

REGISTER_LISTENER("daemon-log", 1, DaemonLogListener);

int main(int argc, char** argv) {
    auto choice = nbdsched::itest::server_choice();
    if (!choice.skip_reason.empty()) {
        std::printf("SKIP: %s\n", choice.skip_reason.c_str());
        return 77;
    }
    doctest::Context context(argc, argv);
    return context.run();
}
