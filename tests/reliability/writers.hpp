// Writer threads for the crash and shutdown tests: each owns a slice of the
// blocks and keeps writing versions of them through its own libnbd
// connection, FUA on some writes and FLUSH every few plain writes, recording
// every acknowledgement in the Ledger. A thread stops at the first error
// (the daemon went away) or when asked.
#pragma once

#include <atomic>
#include <cstdint>
#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "blocks.hpp"

namespace nbdsched::reliability {

struct WriterStats {
    std::atomic<std::uint64_t> writes{0};
    std::atomic<std::uint64_t> fua_writes{0};
    std::atomic<std::uint64_t> flushes{0};
    std::atomic<std::uint64_t> errors{0};   // failed requests (expected once the daemon dies)
};

class Writers {
public:
    // `threads` connections to `uri`; thread t writes blocks [t*n, (t+1)*n)
    // with n = ledger.blocks() / threads. Seeded for reproducibility. Returns
    // once every thread has connected or failed to: a test that kills the
    // daemon after the first acknowledgements must not catch a thread still
    // connecting (under ASan on a loaded machine, one was).
    Writers(const std::string& uri, Ledger& ledger, unsigned threads, std::uint64_t seed, WriterStats& stats);
    ~Writers();   // stop() + join
    void stop();
    // Writes acknowledged so far by all threads.
    std::uint64_t acks() const { return acks_; }
    // Connection or setup failures that are not the daemon dying.
    const std::vector<std::string>& setup_errors() const { return setup_errors_; }

private:
    void run(const std::string& uri, unsigned t, unsigned threads, std::uint64_t seed);

    Ledger& ledger_;
    WriterStats& stats_;
    std::atomic<bool> stop_{false};
    std::atomic<std::uint64_t> acks_{0};
    std::vector<std::string> setup_errors_;   // written only before setup_done_ counts down
    std::latch setup_done_;
    std::vector<std::thread> threads_;
};

// Reads every block of the export (libnbd) and decodes it.
std::vector<std::int64_t> read_all_blocks(const std::string& uri, std::size_t blocks);
// The same straight from a backing file, without the daemon.
std::vector<std::int64_t> read_file_blocks(const std::string& path, std::size_t blocks);

}   // namespace nbdsched::reliability
