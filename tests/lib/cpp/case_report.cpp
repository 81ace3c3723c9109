#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "case_report.hpp"

#include <cstdio>

namespace nbdsched::testlib {

namespace {

struct State {
    std::string current_case;
    std::vector<std::string> skips;
    std::vector<std::string> case_logs;
    int cases_run = 0;
};

State& state() {
    static State s;
    return s;
}

struct CaseListener : doctest::IReporter {
    explicit CaseListener(const doctest::ContextOptions&) {}
    void report_query(const doctest::QueryData&) override {}
    void test_run_start() override {}
    void test_run_end(const doctest::TestRunStats&) override {}
    void test_case_start(const doctest::TestCaseData& data) override {
        state().current_case = data.m_name;
        ++state().cases_run;
        state().case_logs.clear();
    }
    void test_case_reenter(const doctest::TestCaseData&) override {}
    void test_case_end(const doctest::CurrentTestCaseStats& st) override {
        std::vector<std::string> logs;
        logs.swap(state().case_logs);
        if (st.testCaseSuccess) return;
        for (const auto& log : logs) std::fprintf(stderr, "%s", log.c_str());
    }
    void test_case_exception(const doctest::TestCaseException&) override {}
    void subcase_start(const doctest::SubcaseSignature&) override {}
    void subcase_end() override {}
    void log_assert(const doctest::AssertData&) override {}
    void log_message(const doctest::MessageData&) override {}
    void test_case_skipped(const doctest::TestCaseData&) override {}
};

}   // namespace

void record_skip(const std::string& reason) {
    auto& s = state();
    s.skips.push_back(s.current_case + ": " + reason);
    std::printf("SKIP: %s\n", s.skips.back().c_str());
    std::fflush(stdout);
}

const std::vector<std::string>& skips() { return state().skips; }

void remember_case_log(const std::string& text) { state().case_logs.push_back(text); }

int run_doctest(int argc, char** argv) {
    doctest::Context context(argc, argv);
    int rc = context.run();
    if (context.shouldExit() || rc != 0) return rc;
    if (state().cases_run == 0) {
        // A filter that matches nothing (a renamed file) must not pass.
        std::printf("FAIL: no test case ran\n");
        return 1;
    }
    if (skips().empty()) return 0;
    // All that ran passed, but not everything could run: meson counts 77 as
    // a skip, and the lines say what was not covered.
    std::printf("SKIP: %zu test case(s) could not run here:\n", skips().size());
    for (const auto& s : skips()) std::printf("SKIP:   %s\n", s.c_str());
    return 77;
}

}   // namespace nbdsched::testlib

REGISTER_LISTENER("case-report", 1, nbdsched::testlib::CaseListener);
