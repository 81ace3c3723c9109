// Fuzz target: the control socket's requests (daemon/control/commands.cpp,
// one JSON object per line; anyone in the socket's group may send them).
// The input is split at newlines, as the server reads it, and each line is
// handled against a small daemon: devices with cfq, bfq under the QoS layer
// and none over fault injection, and groups of which one takes its weight
// from its cgroup. Checked after every line:
//   - the reply is one line of valid JSON: an object with a boolean "ok",
//     and a string "error" when it is false;
//   - nothing out of range was accepted: every group's weight stays in
//     1..1000 (a from-cgroup group's never changes) and its QoS settings pass
//     the configuration's own check; every tunable of every device still
//     reads back.
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <string>
#include <vector>

#include "backend/faulty.hpp"
#include "backend/ram_backend.hpp"
#include "daemon/control/commands.hpp"
#include "sched/qos/qos_scheduler.hpp"
#include "sched/qos/spec.hpp"
#include "sched/weight.hpp"
#include "tests/fuzz/check.hpp"
#include "tests/lib/cpp/control_parts.hpp"

namespace {

using namespace nbdsched;
using namespace nbdsched::daemon;

constexpr unsigned max_lines = 32;

struct Daemon : testlib::ControlParts {

    Daemon() {
        std::vector<config::Group> list(3);
        list[0].name = "default";
        list[1].name = "g1";
        list[1].weight = 500;
        list[2].name = "cg";
        list[2].weight_from_cgroup = true;
        groups = GroupTable(list);
        add("d0", "cfq", false, false);
        add("d1", "bfq", true, false);
        add("d2", "none", false, true);
        state = control::DaemonState{&config, &devices, &exports, &groups};
    }

    void add(const char* name, const char* policy, bool qos, bool faulty) {
        std::string error;
        Device::Parts parts;
        parts.name = name;
        parts.backend = std::make_unique<backend::RamBackend>(4096);
        if (faulty) parts.backend = std::make_unique<backend::FaultyBackend>(std::move(parts.backend),
                                                                             std::vector<FaultRule>{});
        sched::DeviceTraits traits;
        parts.scheduler = sched::make_scheduler(policy, traits, {}, error);
        FUZZ_CHECK(parts.scheduler != nullptr);
        if (qos) parts.scheduler = std::make_unique<sched::qos::QosScheduler>(std::move(parts.scheduler), traits);
        devices.push_back(std::make_unique<Device>(io, nullptr, std::move(parts)));
    }

    void check_state() const {
        for (const auto& g : groups.entries()) {
            FUZZ_CHECK(g.weight >= sched::min_weight && g.weight <= sched::max_weight);
            FUZZ_CHECK(sched::qos::check(g.qos).empty());
        }
        FUZZ_CHECK(groups.at(2).weight == 100);   // from its cgroup: ctl may not set it
        for (const auto& dev : devices) {
            auto& s = dev->scheduler();
            for (const auto& n : s.tunable_names()) FUZZ_CHECK(s.get_tunable(n).has_value());
        }
    }
};

void check_reply(const std::string& reply) {
    FUZZ_CHECK(!reply.empty() && reply.back() == '\n');
    FUZZ_CHECK(reply.find('\n') == reply.size() - 1);   // one line
    auto j = nlohmann::json::parse(reply, nullptr, false);
    FUZZ_CHECK(!j.is_discarded());
    FUZZ_CHECK(j.is_object());
    FUZZ_CHECK(j.contains("ok") && j["ok"].is_boolean());
    if (!j["ok"].get<bool>()) FUZZ_CHECK(j.contains("error") && j["error"].is_string());
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const bool quiet = [] {
        spdlog::set_level(spdlog::level::off);
        return true;
    }();
    (void)quiet;
    Daemon d;
    const std::string input(reinterpret_cast<const char*>(data), size);
    std::size_t at = 0;
    for (unsigned n = 0; n < max_lines && at <= input.size(); ++n) {
        auto end = input.find('\n', at);
        if (end == std::string::npos) end = input.size();
        const std::string line = input.substr(at, end - at);
        at = end + 1;
        check_reply(control::handle_line(line, d.state));
        d.check_state();
    }
    return 0;
}
