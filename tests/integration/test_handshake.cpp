// Handshake and export information as libnbd sees them (GO, INFO,
// LIST, BLOCK_SIZE, STRUCTURED_REPLY, unknown export, transmission flags).
#include <doctest/doctest.h>

#include <cerrno>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"

using namespace nbdsched::testlib;

namespace {

bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

int collect_export(void* user, const char* name, const char* description) {
    (*static_cast<std::map<std::string, std::string>*>(user))[name] = description;
    return 0;
}

}   // namespace

TEST_CASE("handshake over the unix socket and TCP") {
    Daemon d(standard_spec());
    {
        Nbd h = connect(d.uri());
        CHECK(std::string(nbd_get_protocol(h)) == "newstyle-fixed");
        CHECK(nbd_get_size(h) == (64ll << 20));
        CHECK(nbd_aio_is_ready(h) == 1);
    }
    if (!nbdkit_mode()) {
        CHECK(d.log().find("nbdsched: ready") != std::string::npos);
        Nbd h = connect(d.tcp_uri());
        CHECK(nbd_get_size(h) == (64ll << 20));
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("list exports with NBD_OPT_LIST") {
    Daemon d(standard_spec());
    auto h = std::make_unique<Nbd>();
    REQUIRE(nbd_set_opt_mode(*h, true) == 0);
    REQUIRE_MESSAGE(nbd_connect_uri(*h, d.uri().c_str()) == 0, nbd_error());
    std::map<std::string, std::string> exports;
    int n = nbd_opt_list(*h, nbd_list_callback{collect_export, &exports, nullptr});
    if (nbdkit_mode()) {
        MESSAGE("nbdkit lists only its own export; skipping the name checks");
    } else {
        REQUIRE_MESSAGE(n == 2, nbd_error());
        CHECK(exports.count("default") == 1);
        CHECK(exports.count("ro") == 1);
        CHECK(exports["default"] == "integration test RAM export");
    }
    // The option phase carries on after LIST: GO still works.
    REQUIRE(nbd_set_export_name(*h, "default") == 0);
    REQUIRE_MESSAGE(nbd_opt_go(*h) == 0, nbd_error());
    CHECK(nbd_get_size(*h) == (64ll << 20));
    h.reset();
    CHECK(d.stop() == 0);
}

TEST_CASE("export info: size, description and transmission flags") {
    Daemon d(standard_spec());
    {
        Nbd h;
        REQUIRE(nbd_set_full_info(h, true) == 0);
        REQUIRE_MESSAGE(nbd_connect_uri(h, d.uri().c_str()) == 0, nbd_error());
        CHECK(nbd_get_size(h) == (64ll << 20));
        CHECK(nbd_is_read_only(h) == 0);
        CHECK(nbd_can_flush(h) == 1);
        CHECK(nbd_can_fua(h) == 1);
        CHECK(nbd_can_trim(h) == 1);
        CHECK(nbd_can_zero(h) == 1);
        CHECK(nbd_can_multi_conn(h) == 1);
        CHECK(nbd_is_rotational(h) == 0);   // RAM is non-rotational by default
        if (!nbdkit_mode()) {
            char* desc = nbd_get_export_description(h);
            REQUIRE_MESSAGE(desc != nullptr, nbd_error());
            CHECK(std::string(desc) == "integration test RAM export");
            free(desc);
        }
    }
    {
        Nbd h = connect(d.uri("ro"));
        CHECK(nbd_is_read_only(h) == 1);
        CHECK(nbd_get_size(h) == (64ll << 20));
        // Nothing offered that a read-only export would refuse.
        CHECK(nbd_can_trim(h) == 0);
        CHECK(nbd_can_zero(h) == 0);
        CHECK(nbd_can_fast_zero(h) == 0);
        CHECK(nbd_can_fua(h) == 0);
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("block size constraints: minimum, preferred, maximum 32 MiB") {
    Daemon d(standard_spec());
    {
        auto h = connect(d.uri());
        auto min = nbd_get_block_size(h, LIBNBD_SIZE_MINIMUM);
        auto pref = nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED);
        auto max = nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM);
        INFO("min=" << min << " preferred=" << pref << " max=" << max);
        CHECK(is_power_of_two(min));
        CHECK(min <= 4096);
        CHECK(is_power_of_two(pref));
        CHECK(pref >= min);
        CHECK(max == (32ll << 20));
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("an unknown export name is refused, the daemon carries on") {
    Daemon d(standard_spec());
    if (nbdkit_mode()) {
        MESSAGE("nbdkit accepts any export name; skipping");
        return;
    }
    {
        Nbd h;
        CHECK(nbd_connect_uri(h, d.uri("no-such-export").c_str()) == -1);
    }
    {
        // In option mode the refusal is NBD_REP_ERR_UNKNOWN, which libnbd
        // reports as ENOENT, and the handle can still pick a good export.
        Nbd h;
        REQUIRE(nbd_set_opt_mode(h, true) == 0);
        REQUIRE_MESSAGE(nbd_connect_uri(h, d.uri("no-such-export").c_str()) == 0, nbd_error());
        CHECK(nbd_opt_go(h) == -1);
        CHECK(nbd_get_errno() == ENOENT);
        REQUIRE(nbd_set_export_name(h, "default") == 0);
        CHECK_MESSAGE(nbd_opt_go(h) == 0, nbd_error());
        CHECK(nbd_get_size(h) == (64ll << 20));
    }
    {
        Nbd h = connect(d.uri());
        CHECK(nbd_get_size(h) == (64ll << 20));
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("structured replies on and off") {
    Daemon d(standard_spec());
    for (bool structured : {true, false}) {
        CAPTURE(structured);
        Nbd h = connect(d.uri(), structured);
        CHECK(nbd_get_structured_replies_negotiated(h) == (structured ? 1 : 0));
        const std::uint32_t seed = structured ? 11 : 12;
        REQUIRE_MESSAGE(write_pattern(h, 200000, 4097, seed) == 0, nbd_error());
        CHECK(verify_pattern(h, 200000, 4097, seed) == "");
        // Errors arrive in both reply formats.
        REQUIRE(nbd_set_strict_mode(h, 0) == 0);
        char buf[4096];
        CHECK(nbd_pread(h, buf, sizeof buf, (64ull << 20) - 100, 0) == -1);
        CHECK(nbd_get_errno() == EINVAL);
        CHECK(verify_pattern(h, 4096, 4097, seed) == "");
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("SIGTERM with connected clients exits 0") {
    if (nbdkit_mode()) {
        MESSAGE("nbdkit waits for its clients; skipping");
        return;
    }
    Daemon d(standard_spec());
    Nbd idle = connect(d.uri());
    Nbd busy = connect(d.uri());
    REQUIRE(write_pattern(busy, 65536, 0, 5) == 0);
    Nbd handshaking;
    REQUIRE(nbd_set_opt_mode(handshaking, true) == 0);
    REQUIRE_MESSAGE(nbd_connect_uri(handshaking, d.uri().c_str()) == 0, nbd_error());
    CHECK(d.stop() == 0);
}

TEST_CASE("SIGINT stops the daemon cleanly too") {
    Daemon d(standard_spec());
    {
        Nbd h = connect(d.uri());
        REQUIRE(write_pattern(h, 4096, 0, 6) == 0);
    }
    CHECK(d.stop(SIGINT) == 0);
}

TEST_CASE("a maximum payload under 4 KiB lowers the preferred block size, so clients keep the constraints") {
    if (nbdkit_mode()) {
        MESSAGE("SKIP: limits.max_request_bytes is nbdsched's own setting");
        return;
    }
    Daemon d(yaml_spec("devices:\n  - {name: d0, size: 64MiB}\n"
                       "exports:\n  - {name: default, device: d0}\n"
                       "limits:\n  max_request_bytes: 1KiB\n"));
    {
        auto h = connect(d.uri());
        // libnbd drops the whole NBD_INFO_BLOCK_SIZE (0 0 0) when preferred > maximum.
        CHECK(nbd_get_block_size(h, LIBNBD_SIZE_PREFERRED) == 1024);
        CHECK(nbd_get_block_size(h, LIBNBD_SIZE_MAXIMUM) == 1024);
        std::vector<char> data(1024, 'x');
        CHECK(nbd_pwrite(h, data.data(), data.size(), 4096, 0) == 0);
    }
    CHECK(d.stop() == 0);
}
