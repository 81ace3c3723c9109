// AcceptBackoff (daemon/session/accept_backoff.hpp): which accept errors
// wait, how long (10 ms doubling to 1 s, as set, not measured), that a
// cancel() drops the retry and a success starts over.
#include <doctest/doctest.h>

#include <boost/asio/error.hpp>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <vector>

#include "daemon/session/accept_backoff.hpp"

using nbdsched::daemon::AcceptBackoff;

namespace {

boost::system::error_code sys_error(int e) { return {e, boost::system::system_category()}; }

}   // namespace

TEST_CASE("accept back-off: errors that come again at once wait, those about one connection are the caller's") {
    boost::asio::io_context io;
    AcceptBackoff backoff(io, "test");
    int retries = 0;
    // Out of descriptors or memory; refused by a security module; not a listening socket (any more).
    const std::vector<int> repeating{EMFILE, ENFILE, ENOBUFS, ENOMEM, EACCES, EPERM, EBADF, ENOTSOCK, EINVAL};
    for (int e : repeating) {
        CAPTURE(e);
        CHECK(backoff.wait_after(sys_error(e), [&] { ++retries; }));
        io.restart();
        io.run();   // the timer expires, the retry runs
    }
    const auto n = static_cast<int>(repeating.size());
    CHECK(retries == n);
    CHECK(backoff.failures() == static_cast<std::uint64_t>(n));
    for (int e : {ECONNABORTED, EPROTO, ENETUNREACH, EHOSTUNREACH}) {
        CAPTURE(e);
        CHECK_FALSE(backoff.wait_after(sys_error(e), [&] { ++retries; }));
    }
    CHECK_FALSE(backoff.wait_after(boost::asio::error::operation_aborted, [&] { ++retries; }));
    CHECK(backoff.failures() == static_cast<std::uint64_t>(n));
    backoff.accepted();
    CHECK(backoff.failures() == 0);
}

TEST_CASE("accept back-off: 10 ms doubling to 1 s, again from 10 ms after a success") {
    boost::asio::io_context io;
    AcceptBackoff backoff(io, "test");
    using std::chrono::milliseconds;
    CHECK(backoff.delay() == milliseconds(0));
    std::vector<long> delays;
    for (int i = 0; i < 9; ++i) {
        // Each failure re-arms the timer (the wait before it is cancelled).
        REQUIRE(backoff.wait_after(sys_error(EMFILE), [] {}));
        delays.push_back(static_cast<long>(backoff.delay().count()));
    }
    CHECK(delays == std::vector<long>{10, 20, 40, 80, 160, 320, 640, 1000, 1000});
    backoff.accepted();
    CHECK(backoff.delay() == milliseconds(0));
    REQUIRE(backoff.wait_after(sys_error(ENFILE), [] {}));
    CHECK(backoff.delay() == milliseconds(10));
}

TEST_CASE("accept back-off: cancel() drops the pending retry") {
    boost::asio::io_context io;
    AcceptBackoff backoff(io, "test");
    int retries = 0;
    REQUIRE(backoff.wait_after(sys_error(EMFILE), [&] { ++retries; }));
    backoff.cancel();
    io.run();
    CHECK(retries == 0);
    REQUIRE(backoff.wait_after(sys_error(EMFILE), [&] { ++retries; }));   // paused, then resumed: still works
    io.restart();
    io.run();
    CHECK(retries == 1);
}
