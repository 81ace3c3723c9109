// File backend: the file is created with the configured size, and data
// written through the daemon is on disk after FLUSH and after a SIGTERM
// (which must flush file backends), and survives a restart.
#include <doctest/doctest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <vector>

#include "daemon.hpp"
#include "nbd_handle.hpp"
#include "pattern.hpp"

using namespace nbdsched::testlib;

namespace {

constexpr std::uint64_t k_size = 16ull << 20;

ServerSpec file_spec() {
    ServerSpec s;
    s.devices.push_back(device("f0", "file", k_size));
    s.exports.push_back(export_of("default", "f0", false, "file export"));
    return s;
}

std::vector<std::uint8_t> read_file(const std::string& path, std::uint64_t offset,
                                    std::size_t len) {
    std::ifstream f(path, std::ios::binary);
    f.seekg(static_cast<std::streamoff>(offset));
    std::vector<std::uint8_t> out(len);
    f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(len));
    out.resize(static_cast<std::size_t>(f.gcount()));
    return out;
}

}   // namespace

TEST_CASE("file backend: created with its size, data persists across a restart") {
    Daemon d(file_spec());
    const std::string path = d.device_path("f0");
    CHECK(std::filesystem::file_size(path) == k_size);
    {
        Nbd h = connect(d.uri());
        CHECK(nbd_get_size(h) == static_cast<std::int64_t>(k_size));
        REQUIRE(write_pattern(h, 1 << 20, 4097, 1) == 0);
        REQUIRE(write_pattern(h, 4096, k_size - 4096, 2, LIBNBD_CMD_FLAG_FUA) == 0);
        REQUIRE(nbd_zero(h, 4096, 8192, 0) == 0);
        REQUIRE_MESSAGE(nbd_flush(h, 0) == 0, nbd_error());
        // After FLUSH (and FUA) the bytes are in the file itself.
        CHECK((read_file(path, 4097 + 8192 + 4096, 4096) ==
               pattern(4097 + 8192 + 4096, 4096, 1)));
        CHECK((read_file(path, k_size - 4096, 4096) == pattern(k_size - 4096, 4096, 2)));
    }
    REQUIRE(d.stop() == 0);
    d.restart();
    {
        Nbd h = connect(d.uri());
        CHECK(verify_pattern(h, 8192 - 4097, 4097, 1) == "");
        CHECK(reads_zero(h, 4096, 8192));
        CHECK(verify_pattern(h, 4097 + (1 << 20) - 12288, 12288, 1) == "");
        CHECK(verify_pattern(h, 4096, k_size - 4096, 2) == "");
    }
    CHECK(d.stop() == 0);
}

TEST_CASE("file backend: SIGTERM flushes writes that were never flushed") {
    Daemon d(file_spec());
    {
        Nbd h = connect(d.uri());
        REQUIRE(write_pattern(h, 3 << 20, 12345, 3) == 0);
    }
    REQUIRE(d.stop() == 0);
    CHECK((read_file(d.device_path("f0"), 12345, 3 << 20) == pattern(12345, 3 << 20, 3)));
    d.restart();
    {
        Nbd h = connect(d.uri());
        CHECK(verify_pattern(h, 3 << 20, 12345, 3) == "");
        // Trim punches a hole: the range reads as zeros, also after a restart.
        REQUIRE(nbd_trim(h, 1 << 20, 1 << 20, 0) == 0);
        REQUIRE(nbd_flush(h, 0) == 0);
        CHECK(reads_zero(h, 1 << 20, 1 << 20));
    }
    REQUIRE(d.stop() == 0);
    d.restart();
    {
        Nbd h = connect(d.uri());
        CHECK(reads_zero(h, 1 << 20, 1 << 20));
        CHECK(verify_pattern(h, (1 << 20) - 12345, 12345, 3) == "");
        CHECK(verify_pattern(h, 12345 + (3 << 20) - (2 << 20), 2 << 20, 3) == "");
    }
    CHECK(d.stop() == 0);
}
