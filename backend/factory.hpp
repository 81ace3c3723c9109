// Builds a device's data backend from its Spec. The timing profile is not
// applied here: it shapes *when* requests
// complete, which the daemon does with timing::make_model around the backend.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "backend/async_backend.hpp"
#include "backend/backend.hpp"
#include "backend/faulty.hpp"
#include "backend/spec.hpp"

namespace nbdsched::backend {

// nullptr and a message in `error` (naming the device) on failure: bad size,
// file cannot be opened/created, size mismatch (see file_backend.hpp).
// A device with `faults:` gets its storage wrapped in a FaultyBackend.
std::unique_ptr<Backend> make_backend(const Spec& spec, std::string& error);

// The rotational flag a device advertises (NBD_FLAG_ROTATIONAL, scheduler
// traits): Spec::rotational wins when set; `auto` is the real block device's
// sysfs value when the backend is a block device, else the profile's model
// (profile_rotational, nullopt for profile none), else what was detected
// for the file's filesystem, else false (RAM).
bool resolve_rotational(const Spec& spec, const Backend& backend,
                        std::optional<bool> profile_rotational);

// What fault injection did, for stats; nullopt when the device has no faults.
std::optional<FaultStats> fault_stats(const Backend& backend);

// What the device's io_uring engine does with cohorts, for stats; nullopt
// without one that may use them.
std::optional<CohortStats> cohort_stats(Backend& backend);

// The device's fault injection to switch on or off (`ctl faults`); nullptr
// when the device has no faults.
FaultyBackend* faulty_backend(Backend& backend);

}   // namespace nbdsched::backend
