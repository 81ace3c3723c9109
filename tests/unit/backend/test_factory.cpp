#include <doctest/doctest.h>

#include "backend/factory.hpp"
#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"
#include "pattern.hpp"
#include "temp_dir.hpp"

using namespace nbdsched;
using namespace nbdsched::backend;

TEST_CASE("factory: ram and file devices, errors name the device") {
    Spec d;
    d.name = "d0";
    d.size = 1 << 30;
    std::string error;
    auto ram = make_backend(d, error);
    REQUIRE(ram != nullptr);
    CHECK(dynamic_cast<RamBackend*>(ram.get()) != nullptr);
    CHECK(ram->size() == 1 << 30);

    d.size = 0;
    CHECK(make_backend(d, error) == nullptr);
    CHECK(error.find("device d0") != std::string::npos);

    nbdsched::testlib::TempDir dir;
    d.kind = Kind::file;
    d.path = dir.file("f.img");
    d.size = 1 << 20;
    auto file = make_backend(d, error);
    REQUIRE(file != nullptr);
    CHECK(file->blocking());
    CHECK(file->size() == 1 << 20);

    d.path.clear();
    CHECK(make_backend(d, error) == nullptr);
    CHECK(error.find("path") != std::string::npos);
}

TEST_CASE("factory: resolve_rotational precedence") {
    Spec d;
    d.size = 1 << 20;
    std::string error;
    auto ram = make_backend(d, error);
    REQUIRE(ram);
    CHECK_FALSE(resolve_rotational(d, *ram, std::nullopt));   // RAM: non-rotational
    CHECK(resolve_rotational(d, *ram, true));                 // hdd profile
    d.rotational = false;
    CHECK_FALSE(resolve_rotational(d, *ram, true));   // explicit wins
    d.rotational = true;
    CHECK(resolve_rotational(d, *ram, false));
}

TEST_CASE("factory: memory_bytes sees RAM through the fault wrapper, not files") {
    Spec d;
    d.size = 1 << 20;
    std::string error;
    auto ram = make_backend(d, error);
    REQUIRE(ram);
    const auto tables = static_cast<RamBackend&>(*ram).metadata_bytes();
    CHECK(ram->memory_bytes() == tables);   // nothing written: the top table only
    REQUIRE(ram->write(0, nbdsched::testlib::byte_pattern(0, 8192), false) == 0);
    const auto with_data = static_cast<RamBackend&>(*ram).metadata_bytes() + 8192;
    CHECK(ram->memory_bytes() == with_data);
    FaultyBackend faulty(std::move(ram), {});
    CHECK(faulty.memory_bytes() == with_data);
    REQUIRE(faulty.trim(0, 8192, false) == 0);
    CHECK(faulty.memory_bytes() == with_data - 8192);   // the pages are gone (their leaf table stays)
    nbdsched::testlib::TempDir dir;
    d.kind = Kind::file;
    d.path = dir.file("f.img");
    auto file = make_backend(d, error);
    REQUIRE(file);
    CHECK_FALSE(file->memory_bytes().has_value());
}
