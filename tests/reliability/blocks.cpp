#include "blocks.hpp"

#include <algorithm>
#include <cstring>

namespace nbdsched::reliability {

namespace {

constexpr std::uint64_t magic = 0x6e6264736368'4b31ull;   // "nbdsch" "K1"

std::uint64_t mix(std::uint64_t x) {   // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void put64(std::uint8_t* p, std::uint64_t v) { std::memcpy(p, &v, 8); }
std::uint64_t get64(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
}

// FNV-1a over everything but the checksum field (bytes 24..31).
std::uint64_t checksum(std::span<const std::uint8_t> b) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < b.size(); ++i) {
        if (i >= 24 && i < 32) continue;
        h = (h ^ b[i]) * 0x100000001b3ull;
    }
    return h;
}

}   // namespace

void fill_block(std::span<std::uint8_t> out, std::uint64_t index, std::uint64_t version) {
    put64(out.data(), magic);
    put64(out.data() + 8, index);
    put64(out.data() + 16, version);
    std::uint64_t s = mix(index * 1000003 + version);
    for (std::size_t i = 32; i + 8 <= block_size; i += 8) put64(out.data() + i, s = mix(s));
    put64(out.data() + 24, checksum(out.first(block_size)));
}

std::int64_t decode_block(std::span<const std::uint8_t> in, std::uint64_t index) {
    if (std::all_of(in.begin(), in.end(), [](std::uint8_t b) { return b == 0; })) return 0;
    if (get64(in.data()) != magic || get64(in.data() + 8) != index) return -1;
    if (get64(in.data() + 24) != checksum(in)) return -1;
    return static_cast<std::int64_t>(get64(in.data() + 16));
}

std::uint64_t Ledger::send(std::uint64_t index) {
    std::lock_guard lock(mutex_);
    return ++sent_[index];
}

void Ledger::acked(std::uint64_t index, std::uint64_t version) {
    std::lock_guard lock(mutex_);
    acked_[index] = std::max(acked_[index], version);
}

void Ledger::durable(std::uint64_t index, std::uint64_t version) {
    std::lock_guard lock(mutex_);
    durable_[index] = std::max(durable_[index], version);
    acked_[index] = std::max(acked_[index], version);
}

Ledger::Check Ledger::verify_and_rebase(const std::vector<std::int64_t>& read) {
    std::lock_guard lock(mutex_);
    Check c;
    for (std::size_t i = 0; i < durable_.size(); ++i) {
        const std::int64_t v = read[i];
        const bool in_window = v >= 0 && std::uint64_t(v) >= durable_[i] && std::uint64_t(v) <= sent_[i];
        if (!in_window) {
            // A damaged block is still no loss when nothing durable was
            // promised for it since the baseline and a write was under way.
            if (!(v < 0 && durable_[i] == 0 && sent_[i] > 0) && ++c.loss == 1)
                c.first_loss = "block " + std::to_string(i) + ": read " +
                               (v < 0 ? std::string("damaged data") : "version " + std::to_string(v)) +
                               ", durable version " + std::to_string(durable_[i]) + ", newest sent " +
                               std::to_string(sent_[i]);
        } else {
            if (std::uint64_t(v) > acked_[i]) ++c.unacked;
            if (std::uint64_t(v) < acked_[i]) ++c.acked_lost;
        }
        const std::uint64_t now = v > 0 ? std::uint64_t(v) : 0;
        durable_[i] = acked_[i] = now;
        sent_[i] = std::max(sent_[i], now);
    }
    return c;
}

}   // namespace nbdsched::reliability
