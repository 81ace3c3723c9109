#include <doctest/doctest.h>

#include "readahead/window.hpp"
#include "timing/profiles.hpp"

using namespace nbdsched;
using namespace nbdsched::readahead;

TEST_CASE("read-ahead auto: 2 x optimal I/O, 2 x max I/O on a rotational device without one, at least 128 KiB") {
    CHECK(auto_window_bytes(true, 1280u << 10, 0) == 2560u << 10);
    CHECK(auto_window_bytes(true, 0, 0) == 2560u << 10);                 // unknown max_io: the usual 1280 KiB
    CHECK(auto_window_bytes(true, 1280u << 10, 65536) == 128u << 10);    // reports an optimal I/O size
    CHECK(auto_window_bytes(true, 1280u << 10, 1u << 20) == 2u << 20);   // seed 004: max3(.., io_opt * 2, ..)
    CHECK(auto_window_bytes(false, 512u << 10, 1u << 20) == 2u << 20);   // on any device
    CHECK(auto_window_bytes(false, 1280u << 10, 0) == 128u << 10);
    CHECK(auto_window_bytes(true, 32u << 10, 0) == 128u << 10);   // never below the default
    CHECK(window_bytes(std::nullopt, true, 1280u << 10, 0) == 2560u << 10);
    CHECK(window_bytes(0, true, 1280u << 10, 0) == 0);
    CHECK(window_bytes(512, false, 0, 0) == 512u << 10);
}

TEST_CASE("read-ahead auto follows the timing profiles: hdd 2560 KiB, ssd 128 KiB") {
    std::string error;
    auto hdd = timing::make_model("hdd", {}, error);
    REQUIRE(hdd);
    CHECK(window_bytes(std::nullopt, hdd->rotational(), hdd->max_io_bytes(), hdd->optimal_io_bytes()) == 2560u << 10);
    auto ssd = timing::make_model("ssd", {}, error);
    REQUIRE(ssd);
    CHECK(window_bytes(std::nullopt, ssd->rotational(), ssd->max_io_bytes(), ssd->optimal_io_bytes()) == 128u << 10);
}
