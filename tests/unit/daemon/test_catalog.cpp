// daemon/stats/catalog: the one list of counters behind `ctl stats` (its JSON
// and its table) and the Prometheus families. The names each view has always
// used are pinned here, and the three views are checked to show the same numbers.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <cstdio>
#include <set>

#include "backend/factory.hpp"
#include "backend/ram_backend.hpp"
#include "daemon/control/render.hpp"
#include "daemon/control/report.hpp"
#include "daemon/metrics/families.hpp"
#include "daemon/stats/catalog.hpp"
#include "temp_dir.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;
using std::chrono::microseconds;

namespace {

std::set<std::string> keys_of(const control::Json& j) {
    std::set<std::string> keys;
    for (const auto& [key, value] : j.items()) keys.insert(key);
    return keys;
}

// The value of one metric of `families`, by family name and label values.
const prometheus::ClientMetric* find_metric(const std::vector<prometheus::MetricFamily>& families,
                                            const std::string& name,
                                            const std::vector<prometheus::ClientMetric::Label>& labels) {
    for (const auto& f : families)
        if (f.name == name)
            for (const auto& m : f.metric)
                if (m.label == labels) return &m;
    return nullptr;
}

}   // namespace

TEST_CASE("each stat is read from one place and shown somewhere") {
    std::set<std::string> counter_keys, sched_keys, columns;
    for (const auto& stat : stats::catalog()) {
        CAPTURE(stat.key);
        CHECK((stat.counters != nullptr) != (stat.sched != nullptr));
        CHECK((!stat.key.empty() || stat.family));
        if (!stat.key.empty())
            CHECK((stat.from_sched() ? sched_keys : counter_keys).insert(std::string(stat.key)).second);
        if (!stat.column.empty()) {
            CHECK_FALSE(stat.key.empty());   // the table renders from the JSON
            CHECK(columns.insert(std::string(stat.column)).second);
        }
        if (!stat.family) continue;
        CHECK(stat.family->label.empty() == stat.label.empty());
        bool summary = stat.family->type == stats::MetricType::summary;
        CHECK(summary == (stat.part != stats::SummaryPart::none));
    }
}

TEST_CASE("ctl stats keeps its JSON keys and table columns") {
    stats::Counters c;
    CHECK(keys_of(control::counters_json(c)) ==
          std::set<std::string>{"requests", "reads", "writes", "flushes", "trims", "zeroes", "read_bytes",
                                "write_bytes", "in_flight", "errors", "refused", "readahead_hits", "cancelled", "latency_mean_us",
                                "latency_p50_us", "latency_p99_us"});
    CHECK(keys_of(control::sched_json(sched::EntityStats{})) ==
          std::set<std::string>{"dispatched", "completed", "dispatched_sectors", "slices", "idle_ms", "queued",
                                "in_flight", "expired_too_idle", "expired_budget_timeout", "expired_budget_exhausted",
                                "expired_no_more_requests", "expired_preempted", "expired_seeky_turn_ended",
                                "expired_slice_used", "expired_closed"});
    auto text = control::render_stats(control::Json::parse(R"({"devices":[{"name":"d0","scheduler":"none"}]})"));
    auto header = text.substr(text.find('\n') + 1);
    header = header.substr(0, header.find('\n'));
    header = header.substr(header.find_first_not_of(' '));
    CHECK(header == "reads  writes  flushes  trims  zeroes  rd_bytes  wr_bytes  inflt  mean_us  p50_us  p99_us  "
                    "slices  idle_ms  ra_hits  errors  refused");
}

TEST_CASE("every expiry reason has a stat: label as sched names it, JSON key expired_<label>") {
    std::vector<const stats::Stat*> expiry;
    for (const auto& stat : stats::catalog())
        if (stats::is_expiry(stat)) expiry.push_back(&stat);
    REQUIRE(expiry.size() == sched::expiry_reasons);
    sched::EntityStats s;
    for (std::size_t i = 0; i < sched::expiry_reasons; ++i) {
        const auto reason = sched::Expiry(i);
        CAPTURE(sched::to_string(reason));
        CHECK(expiry[i]->label == sched::to_string(reason));
        CHECK(expiry[i]->key == "expired_" + std::string(sched::to_string(reason)));
        CHECK(stats::family_name("group", *expiry[i]->family) == "nbdsched_group_expirations_total");
        CHECK(expiry[i]->family->label == "reason");
        s.expired[i] = 10 + i;   // each stat reads its own reason's count
        CHECK(expiry[i]->sched(s) == 10 + i);
    }
}

TEST_CASE("ctl stats and Prometheus show the same numbers under the same names") {
    boost::asio::io_context io;
    std::string error;
    Device::Parts parts;
    parts.name = "d0";
    parts.backend = std::make_unique<backend::RamBackend>(1 << 20);
    parts.scheduler = sched::make_scheduler("none", {}, {}, error);
    REQUIRE(parts.scheduler);
    std::vector<std::unique_ptr<Device>> devices;
    devices.push_back(std::make_unique<Device>(io, nullptr, std::move(parts)));
    config::Config config;
    ExportTable exports;
    config::Group gold;
    gold.name = "gold";
    gold.weight = 700;
    GroupTable groups({gold});
    control::DaemonState state{&config, &devices, &exports, &groups};

    auto& st = devices[0]->stats();
    st.open_queue(1, {"a", 0, "peer"});
    for (int i = 0; i < 3; ++i) st.submitted(1);
    st.done(1, sched::Op::read, 4096, microseconds(100), false);
    st.done(1, sched::Op::write, 8192, microseconds(300), true);
    st.readahead_hit(1);
    st.refused("a");
    st.refused("a");
    const std::vector<std::byte> data(8192, std::byte{1});
    REQUIRE(devices[0]->backend().write(0, data, false) == 0);

    auto json = control::stats_json(state);
    const auto& dev = json["devices"][0];
    CHECK(dev["counters"]["reads"] == 1);
    CHECK(dev["counters"]["write_bytes"] == 8192);
    CHECK(dev["counters"]["in_flight"] == 1);
    CHECK(dev["exports"][0]["readahead_hits"] == 1);
    CHECK(dev["exports"][0]["refused"] == 2);
    CHECK(dev["counters"]["refused"] == 2);
    CHECK(dev["groups"][0]["counters"]["refused"] == 0);   // a refused client never reaches a group
    CHECK(dev["groups"][0]["counters"]["errors"] == 1);
    CHECK(dev["counters"]["latency_mean_us"] == doctest::Approx(200));
    auto table = control::render_stats(json);
    CHECK(table.find("8KiB") != std::string::npos);

    auto families = metrics::collect(state);
    std::set<std::string> names;
    for (const auto& f : families) names.insert(f.name);
    std::set<std::string> want{"nbdsched_device_queues", "nbdsched_device_lock_lost", "nbdsched_device_storage_failed",
                               "nbdsched_device_inflight_requests",
                               "nbdsched_device_inflight_bytes", "nbdsched_device_inflight_waits_total",
                               "nbdsched_device_memory_bytes", "nbdsched_group_weight"};
    for (std::string level : {"device", "export", "group"}) {
        for (std::string name : {"requests_total", "bytes_total", "errors_total", "readahead_hits_total", "in_flight",
                                 "latency_seconds", "refused_connections_total", "requests_cancelled_total"})
            want.insert("nbdsched_" + level + "_" + name);
        if (level == "export") continue;   // the scheduler knows no exports
        for (std::string name : {"dispatched_total", "slices_total", "idle_seconds_total", "queued", "expirations_total"})
            want.insert("nbdsched_" + level + "_" + name);
    }
    CHECK(names == want);

    auto* lock_lost = find_metric(families, "nbdsched_device_lock_lost", {{"device", "d0"}});
    REQUIRE(lock_lost);
    CHECK(lock_lost->gauge.value == 0);
    auto* storage_failed = find_metric(families, "nbdsched_device_storage_failed", {{"device", "d0"}});
    REQUIRE(storage_failed);
    CHECK(storage_failed->gauge.value == 0);   // RAM remembers no failure to persist
    CHECK_FALSE(dev["lock_lost"].get<bool>());
    state.locks_lost = [](const std::string& device) { return device == "d0"; };   // its take-back failed
    CHECK(control::stats_json(state)["devices"][0]["lock_lost"].get<bool>());
    const auto with_lost = metrics::collect(state);
    lock_lost = find_metric(with_lost, "nbdsched_device_lock_lost", {{"device", "d0"}});
    REQUIRE(lock_lost);
    CHECK(lock_lost->gauge.value == 1);
    state.locks_lost = nullptr;

    // The RAM device's memory: the same number in the JSON, the table and
    // the gauge, and lower after a TRIM.
    const auto memory = devices[0]->backend().memory_bytes();
    REQUIRE(memory);
    CHECK(*memory >= 8192);
    CHECK(dev["memory_bytes"] == *memory);
    const auto first_line = table.substr(0, table.find('\n'));
    char shown[32];   // 8 KiB of pages and ~33 KiB of page tables, in KiB with one decimal
    std::snprintf(shown, sizeof shown, ", memory %.1fKiB):", static_cast<double>(*memory) / 1024);
    CAPTURE(first_line);
    CHECK(first_line.find(shown) != std::string::npos);
    auto* gauge = find_metric(families, "nbdsched_device_memory_bytes", {{"device", "d0"}});
    REQUIRE(gauge);
    CHECK(gauge->gauge.value == static_cast<double>(*memory));
    REQUIRE(devices[0]->backend().trim(0, 8192, false) == 0);
    CHECK(control::stats_json(state)["devices"][0]["memory_bytes"].get<std::uint64_t>() <= *memory - 8192);
    const auto trimmed = metrics::collect(state);
    gauge = find_metric(trimmed, "nbdsched_device_memory_bytes", {{"device", "d0"}});
    REQUIRE(gauge);
    CHECK(gauge->gauge.value <= static_cast<double>(*memory - 8192));

    // A file device's data is not in the daemon's memory: neither view has it.
    testlib::TempDir dir;
    backend::Spec file;
    file.name = "f0";
    file.kind = backend::Kind::file;
    file.path = dir.file("f0.img");
    file.size = 1 << 20;
    Device::Parts file_parts;
    file_parts.name = "f0";
    file_parts.backend = backend::make_backend(file, error);
    REQUIRE(file_parts.backend);
    file_parts.scheduler = sched::make_scheduler("none", {}, {}, error);
    REQUIRE(file_parts.scheduler);
    devices.push_back(std::make_unique<Device>(io, nullptr, std::move(file_parts)));
    const auto both = control::stats_json(state);
    REQUIRE(both["devices"].size() == 2);
    CHECK_FALSE(both["devices"][1].contains("memory_bytes"));
    const auto text = control::render_stats(both);
    const auto f0 = text.find("device f0 (");
    REQUIRE(f0 != std::string::npos);
    CHECK(text.substr(f0, text.find('\n', f0) - f0).find("memory") == std::string::npos);
    const auto with_file = metrics::collect(state);
    CHECK(find_metric(with_file, "nbdsched_device_queues", {{"device", "f0"}}) != nullptr);
    CHECK(find_metric(with_file, "nbdsched_device_memory_bytes", {{"device", "f0"}}) == nullptr);
    devices.pop_back();

    auto* reads = find_metric(families, "nbdsched_device_requests_total", {{"device", "d0"}, {"op", "read"}});
    REQUIRE(reads);
    CHECK(reads->counter.value == 1);
    auto* bytes =
        find_metric(families, "nbdsched_export_bytes_total", {{"device", "d0"}, {"export", "a"}, {"op", "write"}});
    REQUIRE(bytes);
    CHECK(bytes->counter.value == 8192);
    auto* hits = find_metric(families, "nbdsched_group_readahead_hits_total", {{"device", "d0"}, {"group", "gold"}});
    REQUIRE(hits);
    CHECK(hits->counter.value == 1);
    auto* refused =
        find_metric(families, "nbdsched_export_refused_connections_total", {{"device", "d0"}, {"export", "a"}});
    REQUIRE(refused);
    CHECK(refused->counter.value == 2);
    auto* in_flight = find_metric(families, "nbdsched_device_in_flight", {{"device", "d0"}});
    REQUIRE(in_flight);
    CHECK(in_flight->gauge.value == 1);
    auto* latency = find_metric(families, "nbdsched_device_latency_seconds", {{"device", "d0"}});
    REQUIRE(latency);
    CHECK(latency->summary.sample_count == 2);
    CHECK(latency->summary.sample_sum == doctest::Approx(400e-6));
    REQUIRE(latency->summary.quantile.size() == 2);
    CHECK(latency->summary.quantile[0].quantile == 0.5);
    CHECK(latency->summary.quantile[0].value * 1e6 == doctest::Approx(dev["counters"]["latency_p50_us"].get<double>()));
    CHECK(latency->summary.quantile[1].quantile == 0.99);
    CHECK(latency->summary.quantile[1].value * 1e6 == doctest::Approx(dev["counters"]["latency_p99_us"].get<double>()));
    CHECK(find_metric(families, "nbdsched_export_slices_total", {{"device", "d0"}, {"export", "a"}}) == nullptr);
}
