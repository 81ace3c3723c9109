// A well-behaved libnbd client looping verified writes and reads on its own
// region while a test misbehaves elsewhere: it must keep advancing.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

namespace nbdsched::testlib {

class Witness {
public:
    // Loops over [offset, offset + 4 MiB) of the export at `uri`.
    Witness(const std::string& uri, std::uint64_t offset);
    ~Witness();
    void finish();
    long rounds() const { return rounds_; }
    // True once it completes two more rounds (at least one started after
    // the call); false on an error or after 30 s.
    bool advances();
    std::string error() const;

private:
    void run(std::string uri, std::uint64_t offset);
    std::atomic<bool> stop_{false};
    std::atomic<bool> failed_{false};
    std::atomic<long> rounds_{0};
    std::string error_;
    std::thread thread_;
};

}   // namespace nbdsched::testlib
