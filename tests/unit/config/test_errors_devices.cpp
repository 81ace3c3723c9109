// devices[]: sizes, backends, schedulers and their tunables, profiles.
#include "helpers.hpp"

#include <filesystem>
#include <fstream>
#include <optional>
#include <unistd.h>
#include <utility>

#include "backend/features.hpp"
#include "config/parsers.hpp"
#include "temp_dir.hpp"

using namespace nbdsched::config;
using namespace nbdsched::config::test;

namespace {

// One device entry (indented under "  - ") plus an export of it.
LoadResult device(const std::string& body) {
    return load("devices:\n  - " + body + "exports: [{name: e0, device: d0}]\n");
}

}   // namespace

TEST_CASE("bad sizes") {
    expect_error(device("name: d0\n    size: 12XB\n"), "devices[0].size", 3, 11, "bad size '12XB'");
    expect_error(device("name: d0\n    size: 1GiB\n    read_ahead_cache: -1\n"), "devices[0].read_ahead_cache", 4,
                 23, "bad size '-1'");
}

TEST_CASE("a ram device needs a size above 0, and at most 64TiB") {
    expect_error(device("name: d0\n"), "devices[0].size", 2, 5, "missing: a ram device needs a size");
    expect_error(device("name: d0\n    size: 0\n"), "devices[0].size", 3, 11, "above 0");
    // Found by --check-config, not only when the daemon starts (without a position, in bytes).
    expect_error(device("name: d0\n    size: 65TiB\n"), "devices[0].size", 3, 11,
                 "a ram device is at most 64TiB, got 65TiB");
    CHECK(device("name: d0\n    size: 64TiB\n").config.has_value());
}

TEST_CASE("huge_pages: a ram device's, on by default, reaching the backend's spec; an error elsewhere") {
    auto on = device("name: d0\n    size: 1GiB\n");
    REQUIRE(on.config);
    CHECK(on.config->devices[0].backend_spec().huge_pages);
    auto off = device("name: d0\n    size: 1GiB\n    huge_pages: false\n");
    INFO(all_errors(off));
    REQUIRE(off.config);
    CHECK_FALSE(off.config->devices[0].backend_spec().huge_pages);
    expect_error(device("name: d0\n    backend: file\n    path: /x\n    huge_pages: false\n"), "devices[0].huge_pages",
                 5, 17, "only for backend: ram");
}

TEST_CASE("a file device needs a path; a ram device takes none") {
    expect_error(device("name: d0\n    backend: file\n"), "devices[0].path", 3, 14, "missing: a file device needs a path");
    expect_error(device("name: d0\n    backend: ram\n"), "devices[0].size", 3, 14, "missing: a ram device needs a size");
    auto r = device("name: d0\n    size: 1GiB\n    path: /x\n    direct: true\n");
    expect_error(r, "devices[0].path", 4, 11, "only for backend: file");
    expect_error(r, "devices[0].direct", 5, 13, "only for backend: file");
    auto ok = device("name: d0\n    backend: file\n    path: /x\n");
    INFO(all_errors(ok));
    REQUIRE(ok.config);
    CHECK(ok.config->devices[0].backend_spec().io_engine == nbdsched::backend::IoEngine::automatic);
}

TEST_CASE("direct: true needs a size the start can serve with O_DIRECT") {
    expect_error(device("name: d0\n    backend: file\n    path: /nonexistent/x.img\n    size: 10000\n    direct: true\n"),
                 "devices[0].size", 5, 11, "size 10000 is not a multiple of 4096 as O_DIRECT (direct: true) needs");
    for (const char* ok_body : {"name: d0\n    backend: file\n    path: /nonexistent/x.img\n    size: 16MiB\n    direct: true\n",
                                "name: d0\n    backend: file\n    path: /nonexistent/x.img\n    size: 10000\n",
                                "name: d0\n    backend: file\n    path: /nonexistent/x.img\n    direct: true\n"}) {
        auto ok = device(ok_body);
        INFO(all_errors(ok));
        CHECK(ok.config);
    }
}

TEST_CASE("io_engine: threads, io_uring or auto, for file devices only") {
    for (auto [word, engine] : {std::pair{"threads", nbdsched::backend::IoEngine::threads},
                                std::pair{"io_uring", nbdsched::backend::IoEngine::io_uring},
                                std::pair{"auto", nbdsched::backend::IoEngine::automatic}}) {
        auto ok = device(std::string("name: d0\n    backend: file\n    path: /x\n    io_engine: ") + word + "\n");
        INFO(all_errors(ok));
        REQUIRE(ok.config);
        CHECK(ok.config->devices[0].backend_spec().io_engine == engine);
    }
    expect_error(device("name: d0\n    backend: file\n    path: /x\n    io_engine: uring\n"), "devices[0].io_engine", 5,
                 16, "io_uring");
    expect_error(device("name: d0\n    size: 1GiB\n    io_engine: threads\n"), "devices[0].io_engine", 4, 16,
                 "only for backend: file");
}

TEST_CASE("io_cohorts: auto (the default) or off, for file devices only") {
    auto by_default = device("name: d0\n    backend: file\n    path: /x\n");
    REQUIRE(by_default.config);
    CHECK(by_default.config->devices[0].backend_spec().io_cohorts);
    for (auto [word, on] : {std::pair{"auto", true}, std::pair{"off", false}}) {
        auto ok = device(std::string("name: d0\n    backend: file\n    path: /x\n    io_cohorts: ") + word + "\n");
        INFO(all_errors(ok));
        REQUIRE(ok.config);
        CHECK(ok.config->devices[0].backend_spec().io_cohorts == on);
    }
    expect_error(device("name: d0\n    backend: file\n    path: /x\n    io_cohorts: on\n"),
                 "devices[0].io_cohorts", 5, 17, "off");
    expect_error(device("name: d0\n    size: 1GiB\n    io_cohorts: off\n"), "devices[0].io_cohorts", 4, 17,
                 "only for backend: file");
}

TEST_CASE("an rbd device: an image, its cluster's keys, no size or path") {
    auto ok = device("name: d0\n    backend: rbd\n    image: vol1\n    namespace: t1\n    ceph_conf: /c.conf\n"
                     "    client: nbd\n    osd_op_timeout: 5\n    mount_timeout: 10\n");
    if (!nbdsched::backend::rbd_available()) {
        expect_error(ok, "devices[0].backend", 3, 14, "rbd is not built into this nbdsched");
        return;
    }
    INFO(all_errors(ok));
    REQUIRE(ok.config);
    const auto& spec = ok.config->devices[0].backend_spec();
    CHECK(spec.kind == BackendKind::rbd);
    CHECK(spec.rbd.pool == "rbd");   // the default
    CHECK(spec.rbd.image == "vol1");
    CHECK(spec.rbd.rados_namespace == "t1");
    CHECK(spec.rbd.ceph_conf == "/c.conf");
    CHECK(spec.rbd.client == "nbd");
    CHECK(spec.rbd.osd_op_timeout == 5u);
    CHECK(spec.rbd.mount_timeout == 10u);
    CHECK_FALSE(spec.rbd.break_lock);

    auto r = device("name: d0\n    backend: rbd\n    size: 1GiB\n    path: /x\n    pool: a/b\n"
                    "    osd_op_timeout: 4000\n");
    expect_error(r, "devices[0].image", 3, 14, "missing: an rbd device needs an image");
    expect_error(r, "devices[0].size", 4, 11, "not for backend: rbd (the size is the image's)");
    expect_error(r, "devices[0].path", 5, 11, "not for backend: rbd");
    expect_error(r, "devices[0].pool", 6, 11, "'a/b': a name without '/'");
    expect_error(r, "devices[0].osd_op_timeout", 7, 21, "out of range: 4000 (allowed 0..3600)");
    expect_error(device("name: d0\n    size: 1GiB\n    image: vol1\n"), "devices[0].image", 4, 12,
                 "only for backend: rbd");
}

TEST_CASE("rbd_cache: off by default, writearound or writeback; only on an rbd device") {
    using nbdsched::backend::RbdCache;
    const auto cache = [](const std::string& line) { return device("name: d0\n    backend: rbd\n    image: vol1\n" + line); };
    if (nbdsched::backend::rbd_available()) {
        const std::pair<const char*, RbdCache> cases[] = {{"", RbdCache::off},
                                                          {"    rbd_cache: off\n", RbdCache::off},
                                                          {"    rbd_cache: writearound\n", RbdCache::writearound},
                                                          {"    rbd_cache: writeback\n", RbdCache::writeback}};
        for (const auto& c : cases) {   // no structured binding: clang 14 cannot capture one (CAPTURE)
            const char* line = c.first;
            CAPTURE(line);
            auto r = cache(line);
            INFO(all_errors(r));
            REQUIRE(r.config);
            CHECK(r.config->devices[0].backend_spec().rbd.cache == c.second);
        }
    }
    // Checked whether or not rbd is built in.
    expect_error(cache("    rbd_cache: writebak\n"), "devices[0].rbd_cache", 5, 16,
                 "expected one of off, writearound, writeback, got 'writebak' (did you mean 'writeback'?)");
    expect_error(cache("    rbd_cache: true\n"), "devices[0].rbd_cache", 5, 16,
                 "got 'true': the word says which librbd cache");
    expect_error(cache("    rbd_cache: [writeback]\n"), "devices[0].rbd_cache", 5, 16, "one of off, writearound, writeback");
    expect_error(device("name: d0\n    size: 1GiB\n    rbd_cache: writeback\n"), "devices[0].rbd_cache", 4, 16,
                 "only for backend: rbd");
    expect_error(device("name: d0\n    backend: file\n    path: /x\n    rbd_cache: off\n"), "devices[0].rbd_cache", 5,
                 16, "only for backend: rbd");
}

TEST_CASE("two rbd devices on one image are refused; another pool, namespace or cluster is another image") {
    // Checked whether or not rbd is built in (without it, each device also says so).
    const auto two = [](const std::string& a, const std::string& b) {
        return load("devices:\n  - {name: ra, backend: rbd, " + a + "}\n  - {name: rb, backend: rbd, " + b +
                    "}\nexports: [{name: e0, device: ra}, {name: e1, device: rb}]\n");
    };
    auto r = two("image: vol1", "pool: rbd, image: vol1");   // rbd is the default pool
    expect_error(r, "devices[1].image", 3, 48, "device rb is on the same image as device ra (rbd/vol1, line 2)");
    CHECK(all_errors(r).find("export both from one device") != std::string::npos);
    expect_error(two("image: v, namespace: t, ceph_conf: /etc/ceph/x.conf",
                     "image: v, namespace: t, ceph_conf: /etc/ceph/../ceph/x.conf"),
                 "devices[1].image", 3, 37, "device rb is on the same image as device ra (rbd/t/v, line 2)");
    // A relative ceph.conf that does not exist, written two ways.
    expect_error(two("image: v, ceph_conf: ./no-such-ceph.conf", "image: v, ceph_conf: no-such-ceph.conf"),
                 "devices[1].image", 3, 37, "device rb is on the same image as device ra (rbd/v, line 2)");
    for (const auto& other : {"image: vol2", "image: vol1, pool: p2", "image: vol1, namespace: t1",
                              "image: vol1, ceph_conf: /etc/ceph/other.conf"}) {
        CAPTURE(other);
        auto ok = two("image: vol1", other);
        INFO(all_errors(ok));
        CHECK(all_errors(ok).find("same image") == std::string::npos);
        if (nbdsched::backend::rbd_available()) CHECK(ok.config);
    }
}

TEST_CASE("bad backend, rotational, names and numbers") {
    auto r = device("name: \"d 0\"\n    backend: rom\n    size: 1GiB\n    rotational: maybe\n"
                    "    queue_depth: 5000\n    read_ahead_kb: lots\n");
    expect_error(r, "devices[0].name", 2, 11, "bad name 'd 0'");
    expect_error(r, "devices[0].backend", 3, 14, "expected one of ram, file, rbd, got 'rom' (did you mean 'ram'?)");
    expect_error(r, "devices[0].rotational", 5, 17, "expected auto, true or false");
    expect_error(r, "devices[0].queue_depth", 6, 18, "out of range: 5000 (allowed 0..4096)");
    expect_error(r, "devices[0].read_ahead_kb", 7, 20, "expected a whole number");
}

TEST_CASE("read_ahead_kb takes auto or a number of KiB") {
    auto r = device("name: d0\n    size: 1GiB\n    read_ahead_kb: 0\n");
    REQUIRE(r.config);
    CHECK(r.config->devices[0].read_ahead_kb == 0u);
    r = device("name: d0\n    size: 1GiB\n    read_ahead_kb: auto\n");
    REQUIRE(r.config);
    CHECK_FALSE(r.config->devices[0].read_ahead_kb);
}

TEST_CASE("unknown scheduler, with a suggestion") {
    expect_error(device("name: d0\n    size: 1GiB\n    scheduler: cfqq\n"), "devices[0].scheduler", 4, 16,
                 "expected one of none, cfq, bfq, got 'cfqq' (did you mean 'cfq'?)");
}

TEST_CASE("tunables the policy does not accept, and bad tunable values") {
    auto r = device("name: d0\n    size: 1GiB\n    scheduler: none\n"
                    "    tunables:\n      max_dpeth: 4\n      quantum: 8\n");
    expect_error(r, "devices[0].tunables.max_dpeth", 6, 7, "not a tunable of scheduler none (did you mean 'max_depth'?)");
    expect_error(r, "devices[0].tunables.quantum", 7, 7, "not a tunable of scheduler none (it has: max_depth)");
    expect_error(device("name: d0\n    size: 1GiB\n    tunables: {max_depth: lots}\n"),
                 "devices[0].tunables.max_depth", 4, 27, "max_depth: bad number 'lots' (want a whole number from 1");
}

TEST_CASE("cfq tunables are checked by the cfq policy itself") {
    auto r = device("name: d0\n    size: 1GiB\n    scheduler: cfq\n"
                    "    tunables: {slice_idl: 8ms, group_idle: soon}\n");
    expect_error(r, "devices[0].tunables.slice_idl", 5, 16, "not a tunable of scheduler cfq (did you mean 'slice_idle'?)");
    expect_error(r, "devices[0].tunables.group_idle", 5, 44, "group_idle");
    auto ok = device("name: d0\n    size: 1GiB\n    scheduler: cfq\n    tunables: {slice_idle: auto, quantum: 4}\n");
    INFO(all_errors(ok));
    REQUIRE(ok.config);
    CHECK(ok.config->devices[0].scheduler == "cfq");
    CHECK(ok.config->devices[0].tunables.at("quantum") == "4");
}

TEST_CASE("a KiB tunable above INT_MAX KiB is an error, not a wrap or a clamp") {
    expect_error(device("name: d0\n    size: 1GiB\n    scheduler: bfq\n    tunables: {back_seek_max: 9223372036854775808}\n"),
                 "devices[0].tunables.back_seek_max", 5, 31,
                 "back_seek_max: bad size '9223372036854775808' (want KiB up to 2147483647");
}

TEST_CASE("unknown profile, with a suggestion") {
    expect_error(device("name: d0\n    size: 1GiB\n    profile: hhd\n"), "devices[0].profile", 4, 14,
                 "unknown profile 'hhd' (none, hdd, ssd, nvme) (did you mean 'hdd'?)");
}

TEST_CASE("bad profile parameters point at the parameter") {
    auto r = device("name: d0\n    size: 1GiB\n    profile: hdd\n    hdd:\n      rpm: fast\n      rpmm: 7200\n");
    expect_error(r, "devices[0].hdd.rpm", 6, 12, "rpm");
    expect_error(r, "devices[0].hdd.rpmm", 7, 7, "unknown parameter 'rpmm'");
}

TEST_CASE("a profile rate or duration out of range points at the parameter") {
    expect_error(device("name: d0\n    size: 1GiB\n    profile: hdd\n    hdd:\n      transfer_rate: inf\n"),
                 "devices[0].hdd.transfer_rate", 6, 22, "must be finite and at least 1KiB/s");
    expect_error(device("name: d0\n    size: 1GiB\n    profile: ssd\n    ssd: {max_io: 3GiB}\n"),
                 "devices[0].ssd.max_io", 5, 19, "is more than 2GiB");
}

TEST_CASE("profile parameters must match the profile, and agree with each other") {
    expect_error(device("name: d0\n    size: 1GiB\n    profile: hdd\n    ssd: {channels: 4}\n"), "devices[0].ssd", 5, 5,
                 "parameters for profile ssd, but this device's profile is hdd");
    expect_error(device("name: d0\n    size: 1GiB\n    ssd: {channels: 4}\n"), "devices[0].ssd", 4, 5,
                 "this device's profile is none");
    // Each is fine against the defaults; together settle > avg_seek.
    expect_error(device("name: d0\n    size: 1GiB\n    profile: hdd\n    hdd: {settle: 3ms, avg_seek: 2ms}\n"),
                 "devices[0].hdd", 5, 10, "hdd: ");
    // Valid together, though settle alone is too slow for the default avg_seek.
    auto slow = device("name: d0\n    size: 1GiB\n    profile: hdd\n    hdd: {settle: 3ms, avg_seek: 8ms, full_stroke_seek: 15ms}\n");
    INFO(all_errors(slow));
    CHECK(slow.config);
    auto ok = device("name: d0\n    size: 1GiB\n    profile: nvme\n    nvme: {channels: 64}\n");
    INFO(all_errors(ok));
    REQUIRE(ok.config);
    CHECK(ok.config->devices[0].profile_params.at("channels") == "64");
}

TEST_CASE("a device needs a name") {
    expect_error(device("size: 1GiB\n"), "devices[0].name", 2, 5, "missing: every device needs a name");
}

TEST_CASE("two file devices over one file are refused, however the path is spelled") {
    nbdsched::testlib::TempDir dir;
    const auto file = dir.file("a.img");
    std::ofstream(file) << "x";
    REQUIRE(::symlink(file.c_str(), dir.file("sym.img").c_str()) == 0);
    REQUIRE(::link(file.c_str(), dir.file("hard.img").c_str()) == 0);
    const auto two = [](const std::string& a, const std::string& b) {
        return load("devices:\n  - {name: sa, backend: file, path: " + a + "}\n  - {name: sb, backend: file, path: " + b +
                    "}\nexports: [{name: e0, device: sa}, {name: e1, device: sb}]\n");
    };
    for (const auto& other : {dir.file("sym.img"), dir.file("hard.img"), dir.path() + "/./a.img", file}) {
        CAPTURE(other);
        auto r = two(file, other);
        expect_error(r, "devices[1].path", 3, 37, "device sb is over the same file as device sa (path " + file);
        CHECK(all_errors(r).find("line 2") != std::string::npos);
    }
    // Not there yet (the first device would create it): the same path is the same file.
    expect_error(two(dir.file("new.img"), dir.path() + "/../" + dir.path().substr(dir.path().rfind('/') + 1) + "/new.img"),
                 "devices[1].path", 3, 37, "is over the same file as device sa");
    auto ok = two(file, dir.file("b.img"));
    INFO(all_errors(ok));
    CHECK(ok.config.has_value());
}

TEST_CASE("a partition's whole disk is read from sysfs") {
    // A sysfs tree as the kernel lays it out: /sys/dev/block/MAJ:MIN links
    // to the device's directory; a partition's sits in its disk's.
    nbdsched::testlib::TempDir dir;
    namespace fs = std::filesystem;
    const fs::path sys = dir.path();
    const auto device = [&](const std::string& at, const std::string& dev, bool partition) {
        fs::create_directories(sys / at);
        std::ofstream(sys / at / "dev") << dev << "\n";
        if (partition) std::ofstream(sys / at / "partition") << "1\n";
        fs::create_directories(sys / "dev" / "block");
        fs::create_symlink("../../" + at, sys / "dev" / "block" / dev);
    };
    device("devices/virtual/block/loop0", "7:0", false);
    device("devices/virtual/block/loop0/loop0p1", "259:0", true);
    device("devices/pci0000:00/block/sda", "8:0", false);
    device("devices/pci0000:00/block/sda/sda2", "8:2", true);
    CHECK(detail::whole_disk_of("259:0", sys) == "7:0");
    CHECK(detail::whole_disk_of("8:2", sys) == "8:0");
    CHECK(detail::whole_disk_of("7:0", sys) == std::nullopt);   // a whole disk
    CHECK(detail::whole_disk_of("8:0", sys) == std::nullopt);
    CHECK(detail::whole_disk_of("9:9", sys) == std::nullopt);   // not in sysfs
}
