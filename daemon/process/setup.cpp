#include "daemon/process/setup.hpp"

#include <spdlog/spdlog.h>

#include "backend/factory.hpp"
#include "backend/file_backend.hpp"
#include "timing/capacity.hpp"
#include "timing/profiles.hpp"
#include "common/undo_unless_dismissed.hpp"
#include "common/units.hpp"
#include "daemon/device/io_limits.hpp"
#include "sched/qos/qos_scheduler.hpp"
#include "sched/scheduler.hpp"

namespace nbdsched::daemon {

namespace {
constexpr unsigned default_depth = 64;   // config.hpp: queue_depth 0 with profile none

bool backend_read_only(backend::Backend& b) {
    auto* file = dynamic_cast<backend::FileBackend*>(&b);
    return file && file->read_only();
}

// A file device that got no ring (seccomp, an old kernel,
// kernel.io_uring_disabled, a build without liburing): under io_engine: auto
// it runs on the threads and one line says why; io_engine: io_uring asked for
// the ring, so the device does not start (false, `error`).
bool check_io_engine(const config::Device& dev, backend::Backend& b, std::string& error) {
    auto* file = dynamic_cast<backend::FileBackend*>(&b);
    if (!file || file->io_uring_error().empty()) return true;
    if (dev.io_engine == backend::IoEngine::io_uring) {
        error = "device " + dev.name + ": io_engine: io_uring, but io_uring is unavailable (" +
                file->io_uring_error() + "); io_engine: auto would use the I/O threads";
        return false;
    }
    spdlog::info("device {}: io_uring unavailable ({}): using the I/O threads", dev.name, file->io_uring_error());
    return true;
}

// The export's window against the opened device. The loader checks this
// already when the config gives the device's size; a file device without one
// is only measured when opened, so the error is made here, in the loader's
// form: "file:line:col: exports[N].size: ...". The config keeps only where
// the export entry starts, so line:column point at the entry.
bool window_fits(const config::Export& exp, std::size_t index, const Device& device, std::string& error) {
    const std::uint64_t device_size = device.size();
    const std::string where = "device '" + exp.device + "' (" + format_size(device_size) + " when opened)";
    const std::string key = "exports[" + std::to_string(index) + "].";
    if (exp.offset >= device_size) {
        error = config::Error{exp.origin, key + "offset",
                              "export '" + exp.name + "': offset " + format_size(exp.offset) +
                                  " is at or past the end of " + where}
                    .str();
        return false;
    }
    if (exp.size && *exp.size > device_size - exp.offset) {
        error = config::Error{exp.origin, key + "size",
                              "export '" + exp.name + "': window " + format_size(exp.offset) + " + " +
                                  format_size(*exp.size) + " ends past the end of " + where}
                    .str();
        return false;
    }
    return true;
}

// What the device's timing profile serves, measured on a model of its own
// (start-up only: 640 requests in virtual time), logged for the
// reservation-sum check.
timing::Capacity profile_capacity(const config::Device& dev, std::uint64_t size) {
    std::string why;
    auto model = timing::make_model(dev.profile, dev.profile_params, why);
    if (!model) return {};
    auto c = timing::measure_capacity(*model, size);
    spdlog::info("device {}: {} profile serves {:.0f} IOPS of 4KiB random reads, {:.1f}MiB/s of 1MiB ones", dev.name,
                 dev.profile, c.iops, c.bps / double(1 << 20));
    return c;
}

}   // namespace

void undo_open(const std::string& device, backend::Backend& backend) {
    if (auto what = backend.undo_open(); !what.empty()) spdlog::warn("device {}: the start failed: {}", device, what);
}

sched::GroupId group_id(const config::Config& config, const std::string& name) {
    for (std::size_t i = 0; i < config.groups.size(); ++i)
        if (config.groups[i].name == name) return static_cast<sched::GroupId>(i);
    return 0;
}

std::unique_ptr<Device> build_device(boost::asio::io_context& io, boost::asio::thread_pool& pool,
                                     const config::Device& dev, const config::Config& config, std::string& error) {
    Device::Parts parts;
    parts.name = dev.name;
    parts.writes_sync = dev.writes_sync;
    parts.max_inflight = config.limits.max_inflight_per_device;
    parts.max_inflight_bytes = config.limits.max_inflight_bytes_per_device;
    parts.inflight_fair_share = config.limits.inflight_fair_share;
    auto spec = dev.backend_spec();
    spec.on_storage_failure = [name = dev.name](const std::string& what) {
        spdlog::error("device {}: {}", name, what);
    };
    spec.on_storage_warning = [name = dev.name](const std::string& what) { spdlog::warn("device {}: {}", name, what); };
    parts.backend = backend::make_backend(spec, error);
    if (!parts.backend) return nullptr;
    // A build that fails after the open undoes what the open changed in the storage.
    UndoUnlessDismissed undo([&name = dev.name, backend = parts.backend.get()] { undo_open(name, *backend); });
    if (!check_io_engine(dev, *parts.backend, error)) return nullptr;
    std::string why;
    parts.model = timing::make_model(dev.profile, dev.profile_params, why);
    if (!parts.model && !why.empty()) {
        error = "device " + dev.name + ": profile " + dev.profile + ": " + why;
        return nullptr;
    }
    std::optional<bool> profile_rotational;
    if (parts.model) profile_rotational = parts.model->rotational();
    parts.rotational = backend::resolve_rotational(dev.backend_spec(), *parts.backend, profile_rotational);
    parts.io_limits = io_limits(parts.model.get(), *parts.backend);
    const bool latency_to_hide = parts.model || parts.backend->blocking();
    parts.read_ahead =
        read_ahead_options(dev, parts.rotational, parts.io_limits, parts.backend->size(), latency_to_hide);

    sched::DeviceTraits traits;
    traits.rotational = parts.rotational;
    traits.max_depth = dev.queue_depth ? dev.queue_depth : parts.model ? parts.model->queue_depth()
                                                                       : default_depth;
    auto policy = sched::make_scheduler(dev.scheduler, traits, dev.tunables, why);
    if (!policy) {
        error = "device " + dev.name + ": scheduler " + dev.scheduler + ": " + why;
        return nullptr;
    }
    // Always behind the QoS layer, so `ctl reserve` works on any device; it
    // passes every call through while no group has a setting.
    auto layer = sched::qos::with_qos(std::move(policy), traits);
    for (std::size_t i = 0; i < config.groups.size(); ++i) {
        layer->set_group(static_cast<sched::GroupId>(i), config.groups[i].weight);
        why = layer->set_qos(static_cast<sched::GroupId>(i), config.groups[i].qos, steady_now());
        if (!why.empty()) {
            error = "group " + config.groups[i].name + ": " + why;   // config/ checked it already
            return nullptr;
        }
    }
    parts.scheduler = std::move(layer);
    parts.capacity = profile_capacity(dev, parts.backend->size());

    spdlog::info("device {}: {}, scheduler {}, depth {}, {}{}, read-ahead {}", dev.name, parts.backend->describe(),
                 dev.scheduler, traits.max_depth, parts.rotational ? "rotational" : "non-rotational",
                 parts.model ? ", timing profile " + dev.profile : std::string(),
                 parts.read_ahead.window_bytes ? format_size(parts.read_ahead.window_bytes) + " (cache " +
                                                     format_size(parts.read_ahead.cache_bytes) + ")"
                                               : std::string("off"));
    undo.dismiss();
    return std::make_unique<Device>(io, &pool, std::move(parts));
}

bool build_exports(const config::Config& config, const std::vector<std::unique_ptr<Device>>& devices,
                   ExportTable& table, std::string& error) {
    table.infos.clear();
    table.bindings.clear();
    for (std::size_t index = 0; index < config.exports.size(); ++index) {
        const config::Export& exp = config.exports[index];
        Device* device = nullptr;
        const config::Device* dev_config = nullptr;
        for (std::size_t i = 0; i < config.devices.size(); ++i) {
            if (config.devices[i].name == exp.device) {
                device = devices[i].get();
                dev_config = &config.devices[i];
            }
        }
        if (!device) {
            error = "export " + exp.name + ": no device " + exp.device;
            return false;
        }
        const std::uint64_t device_size = device->size();
        if (!window_fits(exp, index, *device, error)) return false;
        nbd::ExportInfo info;
        info.name = exp.name;
        info.description = exp.description;
        info.size = exp.size.value_or(device_size - exp.offset);
        bool read_only = exp.readonly || backend_read_only(device->backend());
        if (read_only && !exp.readonly) spdlog::warn("export {}: backing file is read-only; serving read-only", exp.name);
        info.flags = nbd::tflag_has_flags | nbd::tflag_send_flush | nbd::tflag_can_multi_conn | nbd::tflag_send_cache;
        // A read-only export does not offer what it would refuse (EPERM), as nbdkit does.
        if (read_only)
            info.flags |= nbd::tflag_read_only;
        else
            info.flags |= nbd::tflag_send_fua | nbd::tflag_send_trim | nbd::tflag_send_write_zeroes |
                          nbd::tflag_send_fast_zero;
        if (device->rotational()) info.flags |= nbd::tflag_rotational;
        info.min_block = 1;
        info.max_block = config.limits.max_request_bytes;
        info.preferred_block = preferred_block(device->io_limits(), info.max_block);
        ExportBinding binding;
        binding.device = device;
        binding.offset = exp.offset;
        binding.read_only = read_only;
        binding.group = group_id(config, exp.group.empty() ? dev_config->default_group : exp.group);
        binding.allow = exp.allow;
        table.infos.push_back(std::move(info));
        table.bindings.push_back(binding);
    }
    return true;
}

}   // namespace nbdsched::daemon
