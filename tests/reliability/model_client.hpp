// A libnbd client with a model of its region: random writes (some FUA),
// reads verified against the model, trims, write-zeroes (with and without
// NO_HOLE) and flushes; every request's latency is measured. For the soak.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace nbdsched::reliability {

struct ModelStats {
    std::uint64_t requests = 0;
    std::uint64_t reads_verified = 0;
    std::uint64_t trims = 0;
    std::uint64_t zeroes = 0;
    std::uint64_t flushes = 0;
    std::chrono::nanoseconds max_latency{0};
    std::string error;   // the first failure; empty when all went well
};

class ModelClient {
public:
    // Works on [offset, offset + size) of the export at `uri` (4 KiB blocks)
    // until stop() or its first error.
    ModelClient(std::string uri, std::uint64_t offset, std::uint64_t size, std::uint64_t seed);
    ~ModelClient();
    void stop();                // and join; then stats() is final
    ModelStats stats() const;   // after stop()

private:
    void run();
    void op(struct ModelRun& m);

    std::string uri_;
    std::uint64_t offset_, size_, seed_;
    std::atomic<bool> stop_{false};
    ModelStats stats_;
    std::thread thread_;
};

}   // namespace nbdsched::reliability
