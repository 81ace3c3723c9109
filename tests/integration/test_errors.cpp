// Per-request errors: out of range -> EINVAL, write past the end ->
// ENOSPC, write on a read-only export -> EPERM, over the 32 MiB maximum ->
// EINVAL/EOVERFLOW. None of them may cost the connection where the protocol
// lets the server keep it. libnbd checks most of these client-side, so strict
// mode is switched off to make it send the requests anyway.
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_size = 64ull << 20;

Nbd connect_lax(const std::string& uri) {
    Nbd h = connect(uri);
    if (nbd_set_strict_mode(h, 0) != 0) throw std::runtime_error(nbd_error());
    return h;
}

// The connection still carries verified I/O.
void check_still_usable(nbd_handle* h, std::uint32_t seed) {
    CHECK_MESSAGE(nbd_aio_is_ready(h) == 1, "connection no longer ready");
    CHECK_MESSAGE(write_pattern(h, 8192, 4096, seed) == 0, nbd_error());
    CHECK(verify_pattern(h, 8192, 4096, seed) == "");
}

}   // namespace

TEST_CASE("reads out of range fail with EINVAL and keep the connection") {
    Daemon d(standard_spec());
    {
        Nbd h = connect_lax(d.uri());
        std::vector<char> buf(8192);
        struct Case {
            std::uint64_t offset;
            std::size_t len;
        };
        for (Case c : {Case{k_size - 100, 4096}, Case{k_size, 1}, Case{k_size + 4096, 4096},
                       Case{UINT64_MAX - 10, 4096}, Case{UINT64_MAX - 4095, 8192}}) {
            CAPTURE(c.offset);
            CAPTURE(c.len);
            CHECK(nbd_pread(h, buf.data(), c.len, c.offset, 0) == -1);
            CHECK(nbd_get_errno() == EINVAL);
        }
        check_still_usable(h, 1);
        // The last byte is in range.
        CHECK_MESSAGE(nbd_pread(h, buf.data(), 1, k_size - 1, 0) == 0, nbd_error());
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("writes past the end fail with ENOSPC, trim/zero out of range fail") {
    Daemon d(standard_spec());
    {
        Nbd h = connect_lax(d.uri());
        std::vector<char> buf(8192, 'x');
        CHECK(nbd_pwrite(h, buf.data(), 4096, k_size - 100, 0) == -1);
        CHECK(nbd_get_errno() == ENOSPC);
        CHECK(nbd_pwrite(h, buf.data(), 1, k_size, 0) == -1);
        CHECK(nbd_get_errno() == ENOSPC);
        // Overflowing offset+length: either error is allowed by the spec.
        CHECK(nbd_pwrite(h, buf.data(), 4096, UINT64_MAX - 10, 0) == -1);
        CHECK((nbd_get_errno() == EINVAL || nbd_get_errno() == ENOSPC));
        CHECK(nbd_trim(h, 8192, k_size - 4096, 0) == -1);
        CHECK((nbd_get_errno() == EINVAL || nbd_get_errno() == ENOSPC));
        CHECK(nbd_zero(h, 8192, k_size - 4096, 0) == -1);
        CHECK((nbd_get_errno() == EINVAL || nbd_get_errno() == ENOSPC));
        check_still_usable(h, 2);
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("writes, trims and zeroes on a read-only export fail with EPERM") {
    Daemon d(standard_spec());
    {
        Nbd rw = connect(d.uri());
        REQUIRE(write_pattern(rw, 65536, 0, 3) == 0);
        Nbd h = connect_lax(d.uri("ro"));
        REQUIRE(nbd_is_read_only(h) == 1);
        std::vector<char> buf(4096, 'x');
        CHECK(nbd_pwrite(h, buf.data(), buf.size(), 0, 0) == -1);
        CHECK(nbd_get_errno() == EPERM);
        CHECK(nbd_trim(h, 4096, 0, 0) == -1);
        CHECK(nbd_get_errno() == EPERM);
        CHECK(nbd_zero(h, 4096, 0, 0) == -1);
        CHECK(nbd_get_errno() == EPERM);
        // Nothing changed, and the read-only connection still reads.
        CHECK(nbd_aio_is_ready(h) == 1);
        if (!nbdkit_mode())   // nbdkit: exports do not share a device
            CHECK(verify_pattern(h, 65536, 0, 3) == "");
        CHECK(verify_pattern(rw, 65536, 0, 3) == "");
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("an oversize read (> 32 MiB) fails and keeps the connection") {
    Daemon d(standard_spec());
    {
        Nbd h = connect_lax(d.uri());
        std::vector<char> buf((32u << 20) + 4096);
        CHECK(nbd_pread(h, buf.data(), buf.size(), 0, 0) == -1);
        CHECK((nbd_get_errno() == EINVAL || nbd_get_errno() == EOVERFLOW));
        check_still_usable(h, 4);
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("an oversize write (> 32 MiB) fails; the daemon serves on") {
    Daemon d(standard_spec());
    {
        Nbd h = connect_lax(d.uri());
        std::vector<char> buf((32u << 20) + 4096, 'y');
        CHECK(nbd_pwrite(h, buf.data(), buf.size(), 0, 0) == -1);
        // The server may skip the payload and keep the connection, or close it.
        if (nbd_aio_is_ready(h) == 1) {
            CHECK((nbd_get_errno() == EINVAL || nbd_get_errno() == EOVERFLOW ||
                   nbd_get_errno() == ENOMEM));
            check_still_usable(h, 5);
        } else {
            MESSAGE("the server closed the connection after the oversize write");
        }
        // Nothing of the refused write landed.
        Nbd h2 = connect(d.uri());
        CHECK(reads_zero(h2, 4096, 64u << 10));
        check_still_usable(h2, 6);
    }
    CHECK(d.stop() == 0);
}
