// place_connection: the rule's group, and `weight: from-cgroup` read from
// the cgroup the rule names (a fake cgroup tree under a temporary directory).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <vector>

#include "daemon/process/placement.hpp"
#include "temp_dir.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;

namespace {

void write(const std::string& path, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path) << text;
}

}   // namespace

TEST_CASE("weight: from-cgroup takes the weight of the rule's cgroup, not of the peer's own below it") {
    testlib::TempDir root;
    write(root.file("tenants/a/io.weight"), "default 300\n");
    write(root.file("tenants/a/own/io.weight"), "default 900\n");   // the tenant's delegated child

    config::Config config;
    config::Rule by_cgroup;
    by_cgroup.cgroup = "/tenants/a";
    by_cgroup.group = "a";
    config::Rule by_uid;
    by_uid.uid = 1000;
    by_uid.group = "b";
    config.rules = {by_cgroup, by_uid};
    config::Group a, b;
    a.name = "a";
    a.weight_from_cgroup = true;
    b.name = "b";
    b.weight_from_cgroup = true;
    GroupTable groups({a, b});
    std::vector<std::unique_ptr<Device>> devices;
    ExportTable exports;
    control::DaemonState state{&config, &devices, &exports, &groups};

    PeerInfo peer;
    peer.is_unix = true;
    peer.uid = 1000;
    peer.cgroup = "/tenants/a/own";
    const auto id_a = *groups.find("a");
    CHECK(place_connection(state, peer, "x", 999, root.path()) == id_a);
    CHECK(groups.at(id_a).weight == 300);

    // A rule without a cgroup names none: the weight stays.
    peer.cgroup = "/elsewhere/own";
    write(root.file("elsewhere/own/io.weight"), "default 800\n");
    const auto id_b = *groups.find("b");
    CHECK(place_connection(state, peer, "x", 999, root.path()) == id_b);
    CHECK(groups.at(id_b).weight == 100);
}
