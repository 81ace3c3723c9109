// devices[].faults: fault-injection rules and their errors.
#include <cerrno>

#include "helpers.hpp"

using namespace nbdsched;
using namespace nbdsched::config;
using namespace nbdsched::config::test;

namespace {

// A 64 MiB device whose `faults:` value starts on line 4, column 5 ("    - ").
LoadResult faults(const std::string& rules) {
    return load("devices:\n  - name: d0\n    size: 64MiB\n    faults:\n" + rules +
                "exports: [{name: e0, device: d0}]\n");
}

}   // namespace

TEST_CASE("fault rules load with their defaults") {
    auto r = faults("      - {op: read, error: EIO, offset: 1MiB, length: 64KiB}\n"
                    "      - {op: [write, zeroes], error: enospc, offset: 1MiB}\n"
                    "      - {op: flush, rate: 10%, seed: 7}\n"
                    "      - {delay: 50ms}\n");
    INFO(all_errors(r));
    REQUIRE(r.config);
    const auto& f = r.config->devices[0].faults;
    REQUIRE(f.size() == 4);
    CHECK(f[0].ops == fault_read);
    CHECK(f[0].error == EIO);
    CHECK(f[0].offset == 1u << 20);
    CHECK(f[0].length == 64u << 10);
    CHECK(f[0].rate == 1.0);
    CHECK(f[1].ops == (fault_write | fault_zeroes));
    CHECK(f[1].error == ENOSPC);
    CHECK(f[1].has_range());
    CHECK(f[2].error == EIO);   // a rate alone fails with EIO
    CHECK(f[2].rate == doctest::Approx(0.1));
    CHECK(f[2].seed == 7u);
    CHECK_FALSE(f[2].has_range());
    CHECK(f[3].ops == fault_any);
    CHECK(f[3].error == 0);
    CHECK(f[3].delay == std::chrono::milliseconds(50));
}

TEST_CASE("no faults key, no rules") {
    auto r = load(minimal_tail);
    REQUIRE(r.config);
    CHECK(r.config->devices[0].faults.empty());
}

TEST_CASE("bad words in a fault rule, with suggestions") {
    auto r = faults("      - op: raed\n"
                    "        error: EIOO\n"
                    "        eror: EIO\n");
    expect_error(r, "devices[0].faults[0].op", 5, 13, "expected one of read, write, flush, trim, zeroes, any, got 'raed' (did you mean 'read'?)");
    expect_error(r, "devices[0].faults[0].error", 6, 16, "expected one of EIO, ENOSPC");
    expect_error(r, "devices[0].faults[0].error", 6, 16, "(did you mean 'EIO'?)");
    expect_error(r, "devices[0].faults[0].eror", 7, 9, "unknown key (did you mean 'error'?)");
    expect_error(faults("      - {op: [read, wirte], error: EIO}\n"), "devices[0].faults[0].op[1]", 5, 21,
                 "(did you mean 'write'?)");
    expect_error(faults("      - {op: [], error: EIO}\n"), "devices[0].faults[0].op", 5, 14, "empty list");
}

TEST_CASE("bad numbers in a fault rule") {
    expect_error(faults("      - {rate: 1.5}\n"), "devices[0].faults[0].rate", 5, 16, "out of range: 1.5");
    expect_error(faults("      - {rate: 150%}\n"), "devices[0].faults[0].rate", 5, 16, "out of range: 150%");
    expect_error(faults("      - {rate: often}\n"), "devices[0].faults[0].rate", 5, 16, "expected a probability");
    expect_error(faults("      - {delay: soon}\n"), "devices[0].faults[0].delay", 5, 17, "bad duration 'soon'");
    expect_error(faults("      - {delay: 61s}\n"), "devices[0].faults[0].delay", 5, 17, "at most 60s");
    expect_error(faults("      - {error: EIO, length: 0}\n"), "devices[0].faults[0].length", 5, 30, "length of 0");
    expect_error(faults("      - {error: EIO, offset: big}\n"), "devices[0].faults[0].offset", 5, 30, "bad size 'big'");
}

TEST_CASE("fault rules that cannot do anything are refused") {
    expect_error(faults("      - {op: read}\n"), "devices[0].faults[0]", 5, 9, "this rule does nothing");
    expect_error(faults("      - {op: flush, error: EIO, offset: 4KiB}\n"), "devices[0].faults[0].offset", 5, 41,
                 "a flush has no offset range");
    expect_error(faults("      - {error: EIO, seed: 3}\n"), "devices[0].faults[0].seed", 5, 28, "only matters with a rate");
    expect_error(faults("      - {error: EIO, offset: 64MiB}\n"), "devices[0].faults[0].offset", 5, 30,
                 "past the end of the device (64MiB)");
    expect_error(faults("      {error: EIO}\n"), "devices[0].faults", 5, 7, "expected a list");
    expect_error(faults("      - EIO\n"), "devices[0].faults[0]", 5, 9, "expected a mapping");
}
