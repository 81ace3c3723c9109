// make_scheduler / tunable_names: the one place that knows every policy.
#include "sched/cfq/cfq.hpp"
#include "sched/none.hpp"
#include "sched/scheduler.hpp"


// cfq and bfq are wired in explicitly (not via __has_include) once their
// sources are in sched/meson.build, so a header landing first cannot break
// everybody's link.

namespace nbdsched::sched {

std::unique_ptr<Scheduler> make_scheduler(std::string_view policy, const DeviceTraits& device,
                                          const Tunables& tunables, std::string& error) {
    error.clear();
    if (policy == "none") return make_none(device, tunables, error);
    if (policy == "cfq") {
        return make_cfq(device, tunables, error);
    }
    if (policy == "bfq") {
#ifdef NBDSCHED_HAVE_BFQ
        return make_bfq(device, tunables, error);
#else
        error = "policy bfq not built yet";
        return nullptr;
#endif
    }
    error = "unknown scheduler policy '" + std::string(policy) + "' (none, cfq, bfq)";
    return nullptr;
}

std::vector<std::string> tunable_names(std::string_view policy) {
    if (policy == "none") return none_tunable_names();
    if (policy == "cfq") return cfq_tunable_names();
#ifdef NBDSCHED_HAVE_BFQ
    if (policy == "bfq") return bfq_tunable_names();
#endif
    return {};
}

} // namespace nbdsched::sched
