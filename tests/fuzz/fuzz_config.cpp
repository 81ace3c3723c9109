// Fuzz target: config::load_string on arbitrary text. Loading must never
// crash or throw; it yields either a Config or errors (never both, never
// neither); a Config that loads is internally consistent (references
// resolve, windows fit, names are unique), as config.hpp promises.
#include <cstdint>
#include <set>
#include <string>

#include "config/config.hpp"
#include "sched/scheduler.hpp"
#include "tests/fuzz/check.hpp"

namespace {

using namespace nbdsched;

void check_config(const config::Config& c) {
    FUZZ_CHECK(!c.devices.empty());
    FUZZ_CHECK(!c.exports.empty());
    FUZZ_CHECK(!c.listen.empty());
    FUZZ_CHECK(c.find_group("default") != nullptr);
    std::set<std::string> names;
    for (const auto& d : c.devices) {
        FUZZ_CHECK(names.insert(d.name).second);
        FUZZ_CHECK(c.find_device(d.name) == &d);
        if (d.backend == config::BackendKind::ram) FUZZ_CHECK(d.size > 0);
        if (d.backend == config::BackendKind::file) FUZZ_CHECK(!d.path.empty());
        FUZZ_CHECK(c.find_group(d.default_group) != nullptr);
        // The scheduler and tunables were validated: building one succeeds.
        sched::DeviceTraits traits;
        traits.rotational = d.rotational == config::Tristate::yes;
        std::string error;
        auto s = sched::make_scheduler(d.scheduler, traits, d.tunables, error);
        FUZZ_CHECK(s != nullptr);
        FUZZ_CHECK(error.empty());
    }
    names.clear();
    for (const auto& e : c.exports) {
        FUZZ_CHECK(names.insert(e.name).second);
        FUZZ_CHECK(e.name.size() <= 4096 && e.description.size() <= 4096);
        const config::Device* d = c.find_device(e.device);
        FUZZ_CHECK(d != nullptr);
        if (!e.group.empty()) FUZZ_CHECK(c.find_group(e.group) != nullptr);
        if (d->size != 0) {
            FUZZ_CHECK(e.offset < d->size);
            if (e.size) FUZZ_CHECK(*e.size <= d->size - e.offset);
        }
    }
    names.clear();
    for (const auto& g : c.groups) {
        FUZZ_CHECK(names.insert(g.name).second);
        FUZZ_CHECK(g.weight_from_cgroup || (g.weight >= 1 && g.weight <= 1000));
    }
    for (const auto& r : c.rules) FUZZ_CHECK(c.find_group(r.group) != nullptr);
    FUZZ_CHECK(c.limits.max_inflight_bytes_per_connection >= c.limits.max_request_bytes);
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    auto result = config::load_string(text, "fuzz.yaml");
    FUZZ_CHECK(result.config.has_value() != !result.errors.empty());
    for (const auto& e : result.errors) FUZZ_CHECK(!e.message.empty() && !e.str().empty());
    if (result.config) check_config(*result.config);
    return 0;
}
