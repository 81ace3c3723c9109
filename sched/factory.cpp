// make_scheduler / tunable_specs: the one place that knows every policy.
#include "sched/bfq/bfq.hpp"
#include "sched/bfq/tunables.hpp"
#include "sched/cfq/cfq.hpp"
#include "sched/cfq/tunables.hpp"
#include "sched/none.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::sched {

std::unique_ptr<Scheduler> make_scheduler(std::string_view policy, const DeviceTraits& device,
                                          const Tunables& tunables, std::string& error) {
    error.clear();
    if (policy == "none") return make_none(device, tunables, error);
    if (policy == "cfq") return make_cfq(device, tunables, error);
    if (policy == "bfq") return make_bfq(device, tunables, error);
    error = "unknown scheduler policy '" + std::string(policy) + "' (none, cfq, bfq)";
    return nullptr;
}

std::vector<TunableSpec> tunable_specs(std::string_view policy) {
    if (policy == "none") return none_table().specs();
    if (policy == "cfq") return cfq::table().specs();
    if (policy == "bfq") return bfq::table().specs();
    return {};
}

std::vector<std::string> tunable_names(std::string_view policy) { return tunable_names(tunable_specs(policy)); }

}   // namespace nbdsched::sched
