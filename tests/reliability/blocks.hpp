// Numbered, checksummed blocks and the ledger of what the daemon promised
// about them, for the crash-consistency and shutdown tests.
//
// A block's content is a pure function of (block index, version): a header
// {magic, index, version, checksum} and filler derived from both, so a read
// tells exactly which version landed, or that the block is torn or foreign.
#pragma once

#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace nbdsched::reliability {

inline constexpr std::size_t block_size = 4096;

// Writes version `version` (>= 1) of block `index` into `out` (block_size).
void fill_block(std::span<std::uint8_t> out, std::uint64_t index, std::uint64_t version);

// What a block read back holds: 0 for all zeroes (never written), the
// version for an intact block of that index, nullopt-like -1 for anything
// else (torn, wrong index, bad checksum).
std::int64_t decode_block(std::span<const std::uint8_t> in, std::uint64_t index);

// Per block: the newest version the daemon acknowledged as durable (a FUA
// write, or a write acknowledged before a FLUSH that then succeeded on the
// same connection) and the newest version sent at all. Writes to one block
// come from one thread, in order, so any version in [durable, sent] may be
// on disk after a crash; anything older than `durable`, or damaged, is a loss.
class Ledger {
public:
    explicit Ledger(std::size_t blocks) : durable_(blocks, 0), sent_(blocks, 0), acked_(blocks, 0) {}

    std::size_t blocks() const { return durable_.size(); }
    // The next version of a block, recorded as sent (may be on disk from now on).
    std::uint64_t send(std::uint64_t index);
    void acked(std::uint64_t index, std::uint64_t version);     // plain write acknowledged
    void durable(std::uint64_t index, std::uint64_t version);   // FUA ack, or flushed

    struct Check {
        std::uint64_t loss = 0;         // durable version missing or damaged
        std::uint64_t unacked = 0;      // a newer, unacknowledged version landed (allowed)
        std::uint64_t acked_lost = 0;   // acknowledged (not flushed) version missing: allowed on a crash
        std::string first_loss;
    };
    // Compares the state read back (one decode_block value per block) and
    // then takes it as the new baseline (durable = sent = what was read).
    Check verify_and_rebase(const std::vector<std::int64_t>& read);

private:
    std::mutex mutex_;
    std::vector<std::uint64_t> durable_;
    std::vector<std::uint64_t> sent_;
    std::vector<std::uint64_t> acked_;
};

}   // namespace nbdsched::reliability
