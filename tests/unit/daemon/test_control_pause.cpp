// What the control socket runs with every event loop paused: `ctl stats` and
// the metrics snapshot pause the loops only to copy the numbers; the JSON and
// its text are made after the loops run again, so the pause does not grow
// with the size of the reply.
#include <doctest/doctest.h>

#include <boost/asio/io_context.hpp>
#include <chrono>

#include "backend/ram_backend.hpp"
#include "daemon/control/commands.hpp"
#include "daemon/control/snapshot.hpp"
#include "daemon/metrics/families.hpp"
#include "tests/lib/cpp/control_parts.hpp"

using namespace nbdsched;
using namespace nbdsched::daemon;
using Clock = std::chrono::steady_clock;

namespace {

// 4 devices and 500 groups with some traffic: a reply of megabytes.
struct ManyGroups : testlib::ControlParts {
    int pauses = 0;
    Clock::duration paused{};

    ManyGroups() {
        std::vector<config::Group> list(500);
        for (std::size_t i = 0; i < list.size(); ++i) (list[i].name = "g") += std::to_string(i);
        groups = GroupTable(list);
        config.groups = list;   // ctl changes only groups of the configuration in force
        for (int d = 0; d < 4; ++d) {
            std::string error;
            Device::Parts parts;
            (parts.name = "d") += std::to_string(d);
            parts.backend = std::make_unique<backend::RamBackend>(1 << 20);
            parts.scheduler = sched::make_scheduler("none", {}, {}, error);
            REQUIRE(parts.scheduler);
            devices.push_back(std::make_unique<Device>(io, nullptr, std::move(parts)));
            auto& st = devices.back()->stats();
            for (sched::QueueId q = 1; q <= 500; ++q) {
                st.open_queue(q, {"e", static_cast<sched::GroupId>(q - 1), "peer"});
                st.submitted(q);
                st.done(q, sched::Op::read, 4096, std::chrono::microseconds(100 + q), false);
            }
        }
        state = control::DaemonState{&config, &devices, &exports, &groups};
        state.run_exclusive = [this](const std::function<void()>& f) {
            ++pauses;
            auto start = Clock::now();
            f();
            paused += Clock::now() - start;
        };
    }
};

}   // namespace

TEST_CASE("ctl stats pauses the loops once, for the copy, and makes its reply after") {
    ManyGroups m;
    // The best of a few runs: a loaded host may preempt any one of them.
    double best = 1;
    for (int run = 0; run < 5; ++run) {
        m.pauses = 0;
        m.paused = {};
        auto start = Clock::now();
        auto reply = control::handle_line(R"({"cmd":"stats"})", m.state);
        auto total = Clock::now() - start;
        CHECK(m.pauses == 1);   // the devices are read under the pause, not beside it
        REQUIRE(reply.size() > 1000000);
        CHECK(reply.find(R"("name":"g499")") != std::string::npos);
        best = std::min(best, std::chrono::duration<double>(m.paused) / std::chrono::duration<double>(total));
    }
    // The copy is a few percent of the work; making the JSON and its text is the rest.
    CHECK(best < 0.25);
}

TEST_CASE("the metrics families are built from a snapshot, outside the pause") {
    ManyGroups m;
    auto snapshot = control::take_snapshot(m.state);
    CHECK(m.pauses == 1);
    auto paused = m.paused;
    auto start = Clock::now();
    auto families = metrics::collect(snapshot);   // no DaemonState: it cannot touch a device
    auto building = Clock::now() - start;
    CHECK(m.pauses == 1);
    CHECK_FALSE(families.empty());
    REQUIRE(snapshot.devices.size() == 4);
    REQUIRE(snapshot.devices[0].groups.size() == 500);
    CHECK(snapshot.devices[3].groups[499].numbers.values.size() > 0);
    CHECK(paused < building);
}

TEST_CASE("commands that change a device run inside the pause; reload pauses on its own") {
    ManyGroups m;
    control::handle_line(R"({"cmd":"weight","group":"g1","weight":7})", m.state);
    CHECK(m.pauses == 1);
    CHECK(m.groups.at(1).weight == 7);
    control::handle_line(R"({"cmd":"list"})", m.state);
    CHECK(m.pauses == 2);
    bool reloaded = false;
    m.state.reload = [&] {
        reloaded = true;
        return control::ReloadResult{true, {}};
    };
    control::handle_line(R"({"cmd":"reload"})", m.state);
    CHECK(reloaded);
    CHECK(m.pauses == 2);
}
