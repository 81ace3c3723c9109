// daemon/reload_plan: which config changes a SIGHUP may apply live.
#include <doctest/doctest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/process/reload_plan.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;

namespace {

config::Config base() {
    auto r = config::load_string(R"(
listen: [{unix: /tmp/x.sock}]
devices:
  - {name: d0, backend: ram, size: 64MiB, scheduler: cfq, tunables: {slice_idle: 8ms}}
exports:
  - {name: a, device: d0, size: 32MiB, group: gold}
  - {name: b, device: d0, offset: 32MiB}
groups:
  - {name: gold, weight: 1000}
  - {name: bronze, weight: 100}
rules:
  - {match: {uid: 1000}, group: bronze}
)");
    REQUIRE_MESSAGE(r.config, (r.errors.empty() ? "" : r.errors.front().str()));
    return *r.config;
}

}   // namespace

TEST_CASE("an identical config changes nothing") {
    auto plan = plan_reload(base(), base());
    CHECK(plan.ok());
    CHECK(plan.groups.empty());
    CHECK(plan.tunables.empty());
    CHECK(plan.export_groups.empty());
    CHECK_FALSE(plan.rules_changed);
    CHECK(plan.notes.empty());
}

TEST_CASE("weights, new groups, tunables, rules and export groups apply live") {
    auto next = base();
    for (auto& g : next.groups)
        if (g.name == "bronze") g.weight = 300;
    config::Group silver;
    silver.name = "silver";
    silver.weight = 500;
    next.groups.push_back(silver);
    next.devices[0].tunables["slice_idle"] = "0";
    next.devices[0].tunables["group_idle"] = "0";
    next.exports[1].group = "silver";
    next.rules[0].uid = 1001;
    auto plan = plan_reload(base(), next);
    REQUIRE(plan.ok());
    REQUIRE(plan.groups.size() == 2);
    CHECK(plan.groups[0].name == "bronze");
    CHECK(plan.groups[0].weight == 300);
    CHECK(plan.groups[1].name == "silver");
    REQUIRE(plan.tunables.size() == 1);
    CHECK(plan.tunables[0].first == "d0");
    CHECK(plan.tunables[0].second.at("slice_idle") == "0");
    CHECK(plan.tunables[0].second.at("group_idle") == "0");
    REQUIRE(plan.export_groups.size() == 1);
    CHECK(plan.export_groups[0] == std::pair<std::size_t, std::string>{1, "silver"});
    CHECK(plan.rules_changed);
}

TEST_CASE("backend, size, listen, scheduler and export changes are refused") {
    auto check_refused = [](auto mutate, const char* what) {
        auto next = base();
        mutate(next);
        auto plan = plan_reload(base(), next);
        CHECK_MESSAGE(!plan.ok(), what);
        bool named = false;
        for (const auto& r : plan.refused) named = named || r.find(what) != std::string::npos;
        CHECK_MESSAGE(named, what);
    };
    check_refused([](config::Config& c) { c.tls.psk_file = "/other.psk"; }, "tls:");
    check_refused([](config::Config& c) { c.listen.at(0).tls = config::Listen::Tls::require; }, "listen:");
    check_refused([](config::Config& c) { c.limits.handshake_timeout = std::chrono::seconds(1); }, "limits:");
    check_refused([](config::Config& c) { c.limits.drain_timeout = std::chrono::seconds(2); }, "limits:");
    check_refused([](config::Config& c) { c.devices[0].size = 128u << 20; }, "size");
    check_refused([](config::Config& c) { c.devices[0].backend = config::BackendKind::file; c.devices[0].path = "/tmp/f"; }, "backend");
    check_refused([](config::Config& c) { c.devices[0].scheduler = "bfq"; }, "scheduler");
    check_refused([](config::Config& c) { c.devices[0].profile = "ssd"; }, "profile");
    check_refused([](config::Config& c) { c.listen[0].path = "/tmp/y.sock"; }, "listen");
    check_refused([](config::Config& c) { c.listen[0].mode = 0660; }, "listen");
    check_refused([](config::Config& c) { c.listen[0].group = 100; }, "listen");
    check_refused([](config::Config& c) { c.control = "/tmp/c.sock"; }, "control");
    check_refused([](config::Config& c) { c.metrics = "127.0.0.1:9810"; }, "metrics");
    check_refused([](config::Config& c) { c.exports.pop_back(); }, "exports");
    check_refused([](config::Config& c) { c.exports[0].offset = 4096; }, "export a");
    check_refused([](config::Config& c) { c.limits.max_connections = 5; }, "limits");
    check_refused([](config::Config& c) { c.devices[0].rbd.cache = backend::RbdCache::writeback; }, "rbd_cache");
}

TEST_CASE("every limit but stall_timeout needs a restart; stall_timeout applies live") {
    using namespace std::chrono_literals;
    using Change = std::function<void(config::Limits&)>;
    const std::vector<std::pair<const char*, Change>> restart_only = {
        {"max_connections", [](config::Limits& l) { l.max_connections += 1; }},
        {"max_handshakes", [](config::Limits& l) { l.max_handshakes += 1; }},
        {"max_inflight_per_connection", [](config::Limits& l) { l.max_inflight_per_connection += 1; }},
        {"max_inflight_bytes_per_connection", [](config::Limits& l) { l.max_inflight_bytes_per_connection += 4096; }},
        {"max_request_bytes", [](config::Limits& l) { l.max_request_bytes /= 2; }},
        {"max_inflight_per_device", [](config::Limits& l) { l.max_inflight_per_device += 1; }},
        {"max_inflight_bytes_per_device", [](config::Limits& l) { l.max_inflight_bytes_per_device += 4096; }},
        {"inflight_fair_share", [](config::Limits& l) { l.inflight_fair_share = !l.inflight_fair_share; }},
        {"io_threads", [](config::Limits& l) { l.io_threads += 1; }},
        {"handshake_timeout", [](config::Limits& l) { l.handshake_timeout += 1s; }},
        {"max_handshake_options", [](config::Limits& l) { l.max_handshake_options += 1; }},
        {"drain_timeout", [](config::Limits& l) { l.drain_timeout += 1s; }},
        {"busy_poll", [](config::Limits& l) { l.busy_poll.window += 50us; }},
        {"coalesce", [](config::Limits& l) { l.coalesce.adaptive = !l.coalesce.adaptive; }},
        {"threads", [](config::Limits& l) { l.threads += 1; }},
    };
    for (const auto& [name, change] : restart_only) {
        const std::string limit = name;
        CAPTURE(limit);
        auto next = base();
        change(next.limits);
        auto plan = plan_reload(base(), next);
        CHECK_FALSE(plan.ok());
        CHECK(std::find(plan.refused.begin(), plan.refused.end(), "limits: cannot change without a restart") !=
              plan.refused.end());
    }
    auto next = base();
    next.limits.stall_timeout = 30s;
    auto plan = plan_reload(base(), next);
    CHECK(plan.ok());
    CHECK(plan.refused.empty());
    REQUIRE(plan.notes.size() == 1);
    CHECK(plan.notes[0].find("limits.stall_timeout = 30s") == 0);
}

TEST_CASE("allow: changes apply live, only to the exports whose rules changed") {
    auto old = base();
    config::AllowRule root;
    root.uid = 0;
    root.text = "uid: 0";
    old.exports[1].allow = {root};
    auto next = old;
    next.exports[1].allow[0].text = "user: root";   // same rule, written differently
    next.exports[1].allow[0].origin.line = 40;
    auto plan = plan_reload(old, next);
    CHECK(plan.ok());
    CHECK(plan.export_allow.empty());
    next.exports[1].allow[0].uid = 1000;
    config::AllowRule net;
    net.address = "10.0.0.0/8";
    next.exports[0].allow = {net};
    plan = plan_reload(old, next);
    CHECK(plan.ok());
    CHECK(plan.export_allow == std::vector<std::size_t>{0, 1});
    next.exports[1].allow.clear();
    plan = plan_reload(old, next);
    bool everyone = false;
    for (const auto& n : plan.notes) everyone = everyone || n == "export b: allow: everyone (new connections)";
    CHECK(everyone);
}

TEST_CASE("a device's default_group moves the exports that use it") {
    auto next = base();
    next.devices[0].default_group = "gold";
    auto plan = plan_reload(base(), next);
    REQUIRE(plan.ok());
    REQUIRE(plan.export_groups.size() == 1);
    CHECK(plan.export_groups[0].first == 1);   // export a names its group itself
    CHECK(plan.export_groups[0].second == "gold");
}

TEST_CASE("changed fault rules need a restart") {
    auto next = base();
    FaultRule rule;
    rule.error = 5;
    next.devices[0].faults.push_back(rule);
    auto plan = plan_reload(base(), next);
    REQUIRE_FALSE(plan.ok());
    CHECK(plan.refused.front().find("faults cannot change") != std::string::npos);
}

TEST_CASE("a group's reserve, limit or latency target changes live") {
    auto next = base();
    next.groups[1].qos.reserve.iops = 60;   // groups[0] is the implicit default
    next.groups[2].qos.latency_target = std::chrono::milliseconds(50);
    auto plan = plan_reload(base(), next);
    CHECK(plan.ok());
    REQUIRE(plan.groups.size() == 2);
    CHECK(plan.groups[0].qos.reserve.iops == 60);
    bool noted = false;
    for (const auto& n : plan.notes) noted = noted || n.find("reserve iops 60") != std::string::npos;
    CHECK(noted);
}
