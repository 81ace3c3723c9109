#include "backend/factory.hpp"

#include <sys/stat.h>

#include "backend/faulty.hpp"
#include "backend/file_backend.hpp"
#include "backend/ram_backend.hpp"
#include "common/units.hpp"

namespace nbdsched::backend {

namespace {

std::unique_ptr<Backend> make_storage(const config::Device& device, std::string& error)
{
    const std::string where = "device " + device.name + ": ";
    if (device.backend == config::BackendKind::ram) {
        if (device.size == 0 || device.size > RamBackend::max_size) {
            error = where + "ram size must be between 1 byte and " + format_size(RamBackend::max_size)
                + ", got " + std::to_string(device.size);
            return nullptr;
        }
        return std::make_unique<RamBackend>(device.size);
    }
    if (device.path.empty()) {
        error = where + "file backend needs a path";
        return nullptr;
    }
    std::string why;
    auto file = FileBackend::open({device.path, device.size, device.direct}, why);
    if (!file) {
        error = where + why;
        return nullptr;
    }
    return file;
}

} // namespace

std::unique_ptr<Backend> make_backend(const config::Device& device, std::string& error)
{
    auto storage = make_storage(device, error);
    if (!storage || device.faults.empty())
        return storage;
    return std::make_unique<FaultyBackend>(std::move(storage), device.faults);
}

bool resolve_rotational(const config::Device& device, const Backend& backend,
                        std::optional<bool> profile_rotational)
{
    if (device.rotational != config::Tristate::automatic)
        return device.rotational == config::Tristate::yes;
    struct stat st {};
    const bool block_device = device.backend == config::BackendKind::file
        && ::stat(device.path.c_str(), &st) == 0 && S_ISBLK(st.st_mode);
    if (block_device && backend.detected_rotational())
        return *backend.detected_rotational();
    if (profile_rotational)
        return *profile_rotational;
    return backend.detected_rotational().value_or(false);
}

std::optional<std::uint64_t> allocated_bytes(const Backend& backend)
{
    if (const auto* ram = dynamic_cast<const RamBackend*>(&backend))
        return ram->allocated_bytes();
    if (const auto* faulty = dynamic_cast<const FaultyBackend*>(&backend))
        return allocated_bytes(faulty->inner());
    return std::nullopt;
}

std::optional<FaultStats> fault_stats(const Backend& backend)
{
    if (const auto* faulty = dynamic_cast<const FaultyBackend*>(&backend))
        return faulty->stats();
    return std::nullopt;
}

FaultyBackend* faulty_backend(Backend& backend)
{
    return dynamic_cast<FaultyBackend*>(&backend);
}

} // namespace nbdsched::backend
