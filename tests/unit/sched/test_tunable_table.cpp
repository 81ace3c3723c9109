// The tunable tables: one parser, one error format, kernel-like clamping for
// every policy, and the docs' tables generated from them (a doc that differs
// from its table fails here, with the table to paste).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "sched/scheduler.hpp"
#include "sched/tunable_spec.hpp"

using namespace nbdsched;
using namespace nbdsched::sched;

namespace {

const DeviceTraits kFlash{false, 32};
const DeviceTraits kDisk{true, 1};

TunableSpec spec_of(std::string_view policy, std::string_view name) {
    for (const auto& s : tunable_specs(policy))
        if (s.name == name) return s;
    FAIL("no tunable " << name << " in " << policy);
    return {};
}

std::string parsed(std::string_view policy, std::string_view name, std::string_view text,
                   const DeviceTraits& device = kFlash) {
    auto spec = spec_of(policy, name);
    auto p = parse_tunable(spec, text, device);
    return p.error.empty() ? format_tunable(spec, p.value) : "error: " + p.error;
}

// The lines of `path` from the one after `marker` up to the end of the table.
std::string table_after(const std::string& path, const std::string& marker) {
    std::ifstream in(path);
    REQUIRE_MESSAGE(in, "cannot read " << path);
    std::string line, table;
    bool inside = false;
    while (std::getline(in, line)) {
        if (!inside) {
            inside = line == marker;
            continue;
        }
        if (line.empty() || line[0] != '|') break;
        table += line + "\n";
    }
    CHECK_MESSAGE(inside, path << " has no line '" << marker << "'");
    return table;
}

}   // namespace

TEST_CASE("every policy's defaults parse, and its scheduler reports them") {
    for (std::string_view policy : {"none", "cfq", "bfq"}) {
        CAPTURE(policy);
        std::string error;
        auto s = make_scheduler(policy, kFlash, {}, error);
        REQUIRE(s);
        CHECK(s->tunable_names() == tunable_names(policy));
        for (const auto& spec : tunable_specs(policy)) {
            CAPTURE(spec.name);
            CHECK_FALSE(spec.why.empty());
            auto p = parse_tunable(spec, spec.default_value, kFlash);
            CHECK(p.error.empty());
            CHECK(s->get_tunable(spec.name) == format_tunable(spec, p.value));
            CHECK((spec.default_value != "auto" || spec.auto_value.of));
        }
    }
    CHECK(tunable_specs("deadline").empty());
}

TEST_CASE("one error format for every policy and unit") {
    CHECK(parsed("cfq", "slice_idle", "x") ==
          "error: slice_idle: bad duration 'x' (want a duration, e.g. 8ms, 100us, 0, or auto)");
    CHECK(parsed("bfq", "slice_idle", "fast") ==
          "error: slice_idle: bad duration 'fast' (want a duration, e.g. 8ms, 100us, 0, or auto)");
    CHECK(parsed("cfq", "quantum", "lots") == "error: quantum: bad number 'lots' (want a whole number)");
    CHECK(parsed("none", "max_depth", "0") ==
          "error: max_depth: bad number '0' (want a whole number from 1, or auto)");
    CHECK(parsed("bfq", "max_budget", "-3") ==
          "error: max_budget: bad number '-3' (want a whole number of sectors, or auto)");
    CHECK(parsed("cfq", "back_seek_max", "far") ==
          "error: back_seek_max: bad size 'far' (want KiB up to 2147483647 or a size below 2TiB, e.g. 16384, 16MiB)");
    CHECK(parsed("bfq", "low_latency", "maybe") == "error: low_latency: bad value 'maybe' (want 0 or 1)");
    CHECK(unknown_tunable_error("none", tunable_specs("none"), "quantum") ==
          "none has no tunable 'quantum' (it has: max_depth)");

    // A scheduler's set_tunable reports the same words, and keeps its value.
    std::string error;
    auto s = make_scheduler("bfq", kFlash, {}, error);
    CHECK(s->set_tunable("timeout_sync", " soon", Time{}) ==
          "timeout_sync: bad duration ' soon' (want a duration, e.g. 8ms, 100us, 0)");
    CHECK(s->get_tunable("timeout_sync") == "125ms");
    CHECK(s->set_tunable("quantum", "1", Time{}).find("bfq has no tunable 'quantum' (it has: slice_idle") == 0);
    CHECK(make_scheduler("cfq", kFlash, {{"group_idle", "soon"}}, error) == nullptr);
    CHECK(error.rfind("group_idle: bad duration 'soon'", 0) == 0);
}

TEST_CASE("clamping like the kernel's store functions") {
    CHECK(parsed("cfq", "quantum", "0") == "1");
    CHECK(parsed("cfq", "slice_sync", "0") == "1ms");
    CHECK(parsed("cfq", "slice_idle", "0") == "0");
    CHECK(parsed("bfq", "timeout_sync", "10us") == "1ms");
    CHECK(parsed("bfq", "back_seek_penalty", "0") == "1");
    CHECK(parsed("bfq", "back_seek_penalty", "99999999") == "1048576");
    CHECK(parsed("bfq", "max_budget", "99999999999") == "2147483647");
    CHECK(parsed("none", "max_depth", "64", DeviceTraits{false, 8}) == "8");   // the device's depth
    CHECK(parsed("none", "max_depth", "auto", DeviceTraits{false, 8}) == "8");
    CHECK(parsed("none", "max_depth", "auto", DeviceTraits{false, 0}) == "1");
}

TEST_CASE("KiB tunables take at most INT_MAX KiB and refuse more, never wrap or clamp") {
    // bfq doubled 2^63 KiB into 0 sectors (no backward seeks at all); cfq
    // clamped 99999999999999 to its 32-bit field without a word.
    // Not a structured binding: clang 14 cannot capture one in CAPTURE's lambda.
    for (const auto& tunable : {std::pair{"cfq", "back_seek_max"}, {"bfq", "back_seek_max"}, {"cfq", "iops_charge_kb"}}) {
        const char* policy = tunable.first;
        const char* name = tunable.second;
        CAPTURE(policy);
        CAPTURE(name);
        CHECK(parsed(policy, name, "2147483647") == "2147483647");
        CHECK(parsed(policy, name, "1TiB") == "1073741824");
        for (auto text : {"2147483648", "99999999999999", "9223372036854775808", "2TiB", "16EiB"})
            CHECK(parsed(policy, name, text) == "error: " + std::string(name) + ": bad size '" + text +
                                                    "' (want KiB up to 2147483647 or a size below 2TiB, e.g. 16384, "
                                                    "16MiB)");
    }
    // ctl set and the YAML's tunables: go through the same table; a refused
    // set keeps the value.
    for (std::string_view policy : {"cfq", "bfq"}) {
        CAPTURE(policy);
        std::string error;
        auto s = make_scheduler(policy, kDisk, {}, error);
        REQUIRE(s);
        CHECK(s->set_tunable("back_seek_max", "9223372036854775808", Time{}).find("bad size") != std::string::npos);
        CHECK(s->get_tunable("back_seek_max") == "16384");
        CHECK(s->set_tunable("back_seek_max", "2147483647", Time{}).empty());
        CHECK(s->get_tunable("back_seek_max") == "2147483647");
        CHECK(make_scheduler(policy, kDisk, {{"back_seek_max", "99999999999999"}}, error) == nullptr);
        CHECK(error.rfind("back_seek_max: bad size '99999999999999'", 0) == 0);
    }
}

TEST_CASE("a KiB tunable written as a size must be whole KiB, not rounded down") {
    CHECK(parsed("cfq", "back_seek_max", "512b") ==
          "error: back_seek_max: '512b' is 512 bytes, not a whole number of KiB (want KiB up to 2147483647 or a size "
          "below 2TiB, e.g. 16384, 16MiB)");
    CHECK(parsed("cfq", "iops_charge_kb", "1.5k").rfind("error: iops_charge_kb: '1.5k' is 1536 bytes, not a whole", 0) ==
          0);
    CHECK(parsed("bfq", "back_seek_max", "1025b").find("not a whole number of KiB") != std::string::npos);
    CHECK(parsed("cfq", "back_seek_max", "2048b") == "2");
    CHECK(parsed("cfq", "iops_charge_kb", "1.5MiB") == "1536");
}

TEST_CASE("units: bare numbers as in sysfs, units, words, auto, blanks") {
    CHECK(parsed("cfq", "slice_idle", "8") == "8ms");
    CHECK(parsed("cfq", "slice_idle", " 1.5s ") == "1500ms");
    CHECK(parsed("cfq", "slice_idle", "auto", kDisk) == "8ms");
    CHECK(parsed("bfq", "slice_idle", " auto", kFlash) == "0");
    CHECK(parsed("cfq", "back_seek_max", "1MiB") == "1024");
    CHECK(parsed("bfq", "back_seek_max", "2048") == "2048");
    CHECK(parsed("bfq", "max_budget", "auto") == "0");
    CHECK(parsed("cfq", "group_idle", "auto").rfind("error: group_idle: bad duration 'auto'", 0) == 0);
    for (auto [text, value] : {std::pair{"on", "1"}, {"yes", "1"}, {"true", "1"}, {"1", "1"}, {"off", "0"}, {"no", "0"}, {"false", "0"}, {" 0 ", "0"}})
        CHECK(parsed("cfq", "low_latency", text) == value);
}

TEST_CASE("bfq strict_guarantees raises slice_idle to 8ms, once, as the kernel's store does") {
    std::string error;
    auto s = make_scheduler("bfq", kFlash, {{"slice_idle", "2ms"}, {"strict_guarantees", "on"}}, error);
    REQUIRE(s);
    CHECK(s->get_tunable("slice_idle") == "8ms");
    CHECK(s->set_tunable("slice_idle", "1ms", Time{}).empty());
    CHECK(s->set_tunable("strict_guarantees", "1", Time{}).empty());   // already on: no raise
    CHECK(s->get_tunable("slice_idle") == "1ms");
}

TEST_CASE("the docs' tunable tables are the tables in the code") {
    for (std::string policy : {"cfq", "bfq"}) {
        CAPTURE(policy);
        const std::string doc = std::string(NBDSCHED_DOCS_DIR) + "/schedulers-" + policy + ".md";
        const std::string marker = "<!-- tunables table: generated from sched/" + policy +
                                   "/tunables.cpp, checked by tests/unit/sched/test_tunable_table.cpp -->";
        const std::string want = tunables_markdown(tunable_specs(policy));
        const bool same = table_after(doc, marker) == want;
        CHECK_MESSAGE(same,
                      doc << ": the tunables table differs from the code's; put this after the marker line:\n"
                          << want);
    }
}
