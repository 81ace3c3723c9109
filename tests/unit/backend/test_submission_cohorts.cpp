// When a loop-driven engine hands its waiting requests to the kernel
// (backend/submission_cohorts.hpp): a pure rule, checked here over the
// depths a device can have; test_file_uring.cpp runs it on a real ring.
#include <doctest/doctest.h>

#include "backend/submission_cohorts.hpp"

using namespace nbdsched::backend::cohorts;

TEST_CASE("cohorts: at a low queue depth every request goes at once") {
    CHECK(admit(0, 1) == 1);
    CHECK(admit(0, 4) == 4);
    CHECK(admit(1, 1) == 1);
    CHECK(admit(3, 5) == 5);
    CHECK(admit(0, k_min_in_kernel) == k_min_in_kernel);
}

TEST_CASE("cohorts: a burst at an idle disk makes two cohorts; the second waits for the first's completions") {
    CHECK(admit(0, 64) == 32);
    CHECK(admit(32, 32) == 0);
    CHECK(admit(0, 65) == 33);
    CHECK(admit(33, 32) == 0);
    CHECK(admit(0, 16) == 8);
    CHECK(admit(8, 8) == 0);
}

TEST_CASE("cohorts: a request arriving while a deep queue is in the kernel waits for the next completions") {
    CHECK(admit(63, 1) == 0);
    CHECK(admit(32, 1) == 0);
    // A small cohort in the kernel lets the next requests join up to half.
    CHECK(admit(10, 30) == 10);
}

TEST_CASE("cohorts: nothing in the kernel means something goes, never more than waits") {
    for (std::size_t waiting = 1; waiting <= 4096; ++waiting) {
        CAPTURE(waiting);
        REQUIRE(admit(0, waiting) >= 1);   // no completion would come to let it in
        for (std::size_t in_kernel : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{8}, std::size_t{100}})
            REQUIRE(admit(in_kernel, waiting) <= waiting);
    }
    CHECK(admit(0, 0) == 0);
    CHECK(admit(5, 0) == 0);
}
