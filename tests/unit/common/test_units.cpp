#include <doctest/doctest.h>

#include "common/units.hpp"

using namespace nbdsched;
using namespace std::chrono_literals;

TEST_CASE("sizes with binary suffixes") {
    CHECK(parse_size("4096") == 4096u);
    CHECK(parse_size("4k") == 4096u);
    CHECK(parse_size("4KiB") == 4096u);
    CHECK(parse_size("1GiB") == (1ull << 30));
    CHECK(parse_size("1.5M") == 1572864u);
    CHECK(parse_size(" 2 TiB ") == (2ull << 40));
    CHECK(parse_size("512B") == 512u);
    CHECK(parse_size(".5k") == 512u);
    CHECK(parse_size("1.") == 1u);
    CHECK(parse_size("1.50000000000000000000000000GiB") == (3ull << 29));
}

TEST_CASE("sizes are exact to the byte, also above 2^53") {
    CHECK(parse_size("9007199254740993") == 9007199254740993ull);   // 2^53 + 1: a double made it 2^53
    CHECK(parse_size("18446744073709551615") == 18446744073709551615ull);
    CHECK(parse_size("18446744073709551615b") == 18446744073709551615ull);
    CHECK(parse_size("16383.999999999999999999P").has_value() == false);   // not whole bytes
    CHECK(parse_size("8191.5P") == (8191ull << 50) + (1ull << 49));
    CHECK_FALSE(parse_size("18446744073709551616"));   // 2^64
    CHECK_FALSE(parse_size("16EiB"));
    CHECK_FALSE(parse_size("16384P"));   // 2^64
    CHECK_FALSE(parse_size("1.2.3k"));
    CHECK_FALSE(parse_size("."));
}

TEST_CASE("bad sizes are refused") {
    CHECK_FALSE(parse_size(""));
    CHECK_FALSE(parse_size("abc"));
    CHECK_FALSE(parse_size("-1"));
    CHECK_FALSE(parse_size("1X"));
    CHECK_FALSE(parse_size("0.3"));          // not a whole number of bytes
    CHECK_FALSE(parse_size("100000000P"));   // overflows 64 bits
}

TEST_CASE("durations with units and bare milliseconds") {
    CHECK(parse_duration("8ms") == Nanos(8ms));
    CHECK(parse_duration("100us") == Nanos(100us));
    CHECK(parse_duration("1.5s") == Nanos(1500ms));
    CHECK(parse_duration("8") == Nanos(8ms));
    CHECK(parse_duration("125", 1us) == Nanos(125us));
    CHECK(parse_duration("0") == Nanos(0));
    CHECK(parse_duration("1min") == Nanos(60s));
    CHECK(parse_duration("1h") == Nanos(3600s));
    CHECK(parse_duration("0.5h") == Nanos(1800s));
    CHECK_FALSE(parse_duration("8 parsecs"));
    CHECK_FALSE(parse_duration("-3ms"));
}

TEST_CASE("formatting round-trips") {
    CHECK(format_size(1ull << 30) == "1GiB");
    CHECK(format_size(1536) == "1536B");
    CHECK(format_duration(8ms) == "8ms");
    CHECK(format_duration(150us) == "150us");
    for (auto text : {"8ms", "150us", "3s", "17ns"})
        CHECK(format_duration(*parse_duration(text)) == text);
}
