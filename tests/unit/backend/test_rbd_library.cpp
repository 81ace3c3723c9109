// librados and librbd loaded at run time (backend/rbd_library.hpp): every
// function the backend calls resolves from the installed libraries, and a
// missing library or function is an error that names it.
#include <doctest/doctest.h>

#include <string>

#include "backend/rbd_library.hpp"

using nbdsched::backend::load_rbd_library;
using nbdsched::backend::load_rbd_library_from;
using nbdsched::backend::RbdLibrary;

TEST_CASE("the installed librados and librbd give every function the backend calls") {
    std::string why;
    REQUIRE_MESSAGE(load_rbd_library(why), why);
    const RbdLibrary& lib = nbdsched::backend::librbd();
    int missing = 0;
#define NBDSCHED_COUNT_MISSING(name) missing += lib.name == nullptr;
    NBDSCHED_LIBRADOS_FUNCTIONS(NBDSCHED_COUNT_MISSING)
    NBDSCHED_LIBRBD_FUNCTIONS(NBDSCHED_COUNT_MISSING)
#undef NBDSCHED_COUNT_MISSING
    CHECK(missing == 0);
    // Callable: a cluster handle is made and freed without a cluster.
    rados_t cluster = nullptr;
    REQUIRE(lib.rados_create2(&cluster, "ceph", "client.admin", 0) == 0);
    CHECK(cluster != nullptr);
    lib.rados_shutdown(cluster);
}

TEST_CASE("a library that is not there is named in the error") {
    RbdLibrary lib;
    std::string why;
    CHECK_FALSE(load_rbd_library_from("libnbdsched-no-such-rados.so.0", "librbd.so.1", lib, why));
    CHECK(why.find("cannot load libnbdsched-no-such-rados.so.0") != std::string::npos);
    CHECK(why.find("librbd1") != std::string::npos);
    why.clear();
    CHECK_FALSE(load_rbd_library_from("librados.so.2", "libnbdsched-no-such-rbd.so.0", lib, why));
    CHECK(why.find("cannot load libnbdsched-no-such-rbd.so.0") != std::string::npos);
}

TEST_CASE("a library without the functions is refused, naming the first one missing") {
    RbdLibrary lib;
    std::string why;
    CHECK_FALSE(load_rbd_library_from("libc.so.6", "libc.so.6", lib, why));
    CHECK(why == "libc.so.6 has no rados_blocklist_add");
}
