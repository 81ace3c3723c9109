#include "backend/factory.hpp"

#include <sys/stat.h>

#include "backend/faulty.hpp"
#include "backend/file_backend.hpp"
#include "backend/ram_backend.hpp"
#ifdef NBDSCHED_HAVE_RBD
#include "backend/rbd_backend.hpp"
#endif
#include "common/units.hpp"

namespace nbdsched::backend {

namespace {

std::unique_ptr<Backend> make_rbd(const Spec& spec, std::string& error) {
#ifdef NBDSCHED_HAVE_RBD
    std::string why;
    auto image = RbdBackend::open(spec.rbd, why, spec.on_storage_warning);
    if (!image) error = "device " + spec.name + ": " + why;
    return image;
#else
    error = "device " + spec.name + ": backend rbd is not built into this nbdsched (meson -Drbd=enabled, librbd-dev)";
    return nullptr;
#endif
}

std::unique_ptr<Backend> make_storage(const Spec& spec, std::string& error) {
    const std::string where = "device " + spec.name + ": ";
    if (spec.kind == Kind::ram) {
        if (spec.size == 0 || spec.size > RamBackend::max_size) {
            error = where + "ram size must be between 1 byte and " + format_size(RamBackend::max_size) + ", got " + std::to_string(spec.size);
            return nullptr;
        }
        return std::make_unique<RamBackend>(spec.size, spec.huge_pages);
    }
    if (spec.kind == Kind::rbd) return make_rbd(spec, error);
    if (spec.path.empty()) {
        error = where + "file backend needs a path";
        return nullptr;
    }
    std::string why;
    // A FaultyBackend in front offers no async(): a ring would go unused.
    const bool ring = spec.io_engine != IoEngine::threads && spec.faults.empty();
    auto file = FileBackend::open({spec.path, spec.size, spec.direct, ring, spec.io_cohorts, spec.on_storage_failure,
                                   spec.on_storage_warning},
                                  why);
    if (!file) {
        error = where + why;
        return nullptr;
    }
    return file;
}

}   // namespace

std::unique_ptr<Backend> make_backend(const Spec& spec, std::string& error) {
    auto storage = make_storage(spec, error);
    if (!storage || spec.faults.empty())
        return storage;
    return std::make_unique<FaultyBackend>(std::move(storage), spec.faults);
}

bool resolve_rotational(const Spec& spec, const Backend& backend,
                        std::optional<bool> profile_rotational) {
    if (spec.rotational)
        return *spec.rotational;
    struct stat st {};
    const bool block_device = spec.kind == Kind::file && ::stat(spec.path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
    if (block_device && backend.detected_rotational())
        return *backend.detected_rotational();
    if (profile_rotational)
        return *profile_rotational;
    return backend.detected_rotational().value_or(false);
}

std::optional<FaultStats> fault_stats(const Backend& backend) {
    if (const auto* faulty = dynamic_cast<const FaultyBackend*>(&backend))
        return faulty->stats();
    return std::nullopt;
}

std::optional<CohortStats> cohort_stats(Backend& backend) {
    if (const AsyncBackend* engine = backend.async()) return engine->cohort_stats();
    return std::nullopt;
}

FaultyBackend* faulty_backend(Backend& backend) {
    return dynamic_cast<FaultyBackend*>(&backend);
}

}   // namespace nbdsched::backend
