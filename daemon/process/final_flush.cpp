#include "daemon/process/final_flush.hpp"

#include <algorithm>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

namespace nbdsched::daemon {

FinalFlush flush_devices(const std::vector<std::unique_ptr<Device>>& devices, std::chrono::milliseconds deadline) {
    struct Shared {
        std::mutex mutex;
        std::condition_variable done;
        std::vector<std::optional<int>> results;
    };
    auto shared = std::make_shared<Shared>();
    shared->results.resize(devices.size());
    for (std::size_t i = 0; i < devices.size(); ++i) {
        // Detached: a flush that never returns must not hold up the exit.
        std::thread([shared, i, device = devices[i].get()] {
            const int err = device->flush_now();
            std::lock_guard lock(shared->mutex);
            shared->results[i] = err;
            shared->done.notify_all();
        }).detach();
    }
    std::unique_lock lock(shared->mutex);
    shared->done.wait_for(lock, deadline, [&] {
        return std::all_of(shared->results.begin(), shared->results.end(), [](const auto& r) { return r.has_value(); });
    });
    FinalFlush out;
    for (std::size_t i = 0; i < devices.size(); ++i) {
        const auto& result = shared->results[i];
        if (!result)
            out.unfinished.push_back(devices[i]->name());
        else if (*result != 0)
            out.failed.push_back({devices[i]->name(), *result});
    }
    return out;
}

}   // namespace nbdsched::daemon
