#include "writers.hpp"

#include <algorithm>
#include <fstream>
#include <optional>
#include <mutex>
#include <random>
#include <stdexcept>

#include "nbd_handle.hpp"

namespace nbdsched::reliability {

namespace {
std::mutex setup_mutex;
}

Writers::Writers(const std::string& uri, Ledger& ledger, unsigned threads, std::uint64_t seed,
                 WriterStats& stats)
    : ledger_(ledger), stats_(stats), setup_done_(threads) {
    for (unsigned t = 0; t < threads; ++t)
        threads_.emplace_back([this, uri, t, threads, seed] { run(uri, t, threads, seed); });
    setup_done_.wait();
}

Writers::~Writers() {
    stop();
    for (auto& t : threads_) t.join();
}

void Writers::stop() { stop_ = true; }

void Writers::run(const std::string& uri, unsigned t, unsigned threads, std::uint64_t seed) {
    std::optional<testlib::Nbd> h;
    try {
        h.emplace(testlib::connect(uri));
    } catch (const std::exception& e) {
        std::lock_guard lock(setup_mutex);
        setup_errors_.push_back(e.what());
    }
    setup_done_.count_down();
    if (!h) return;
    std::mt19937_64 rng(seed * 131 + t);
    const std::uint64_t per = ledger_.blocks() / threads, first = t * per;
    std::vector<std::uint8_t> buf;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> unflushed;   // (block, version)
    unsigned until_flush = 1 + rng() % 16;
    while (!stop_) {
        const std::uint64_t count = 1 + rng() % 8;
        const std::uint64_t start = first + rng() % (per - count + 1);
        const bool fua = rng() % 4 == 0;
        buf.resize(count * block_size);
        std::vector<std::uint64_t> versions(count);
        for (std::uint64_t i = 0; i < count; ++i) {
            versions[i] = ledger_.send(start + i);
            fill_block(std::span(buf).subspan(i * block_size, block_size), start + i, versions[i]);
        }
        if (nbd_pwrite(*h, buf.data(), buf.size(), start * block_size, fua ? LIBNBD_CMD_FLAG_FUA : 0) != 0) {
            ++stats_.errors;
            return;
        }
        ++stats_.writes;
        ++acks_;
        if (fua) ++stats_.fua_writes;
        for (std::uint64_t i = 0; i < count; ++i) {
            if (fua) {
                ledger_.durable(start + i, versions[i]);
            } else {
                ledger_.acked(start + i, versions[i]);
                unflushed.emplace_back(start + i, versions[i]);
            }
        }
        if (!fua && --until_flush == 0) {
            until_flush = 1 + rng() % 16;
            if (nbd_flush(*h, 0) != 0) {
                ++stats_.errors;
                return;
            }
            ++stats_.flushes;
            for (auto [block, version] : unflushed) ledger_.durable(block, version);
            unflushed.clear();
        }
    }
}

std::vector<std::int64_t> read_all_blocks(const std::string& uri, std::size_t blocks) {
    testlib::Nbd h = testlib::connect(uri);
    std::vector<std::int64_t> out(blocks);
    constexpr std::size_t chunk = 256;
    std::vector<std::uint8_t> buf(chunk * block_size);
    for (std::size_t b = 0; b < blocks; b += chunk) {
        const std::size_t n = std::min(chunk, blocks - b);
        if (nbd_pread(h, buf.data(), n * block_size, b * block_size, 0) != 0)
            throw std::runtime_error("read back: " + testlib::nbd_error());
        for (std::size_t i = 0; i < n; ++i)
            out[b + i] = decode_block(std::span(buf).subspan(i * block_size, block_size), b + i);
    }
    return out;
}

std::vector<std::int64_t> read_file_blocks(const std::string& path, std::size_t blocks) {
    std::ifstream f(path, std::ios::binary);
    std::vector<std::int64_t> out(blocks);
    std::vector<std::uint8_t> buf(block_size);
    for (std::size_t b = 0; b < blocks; ++b) {
        std::fill(buf.begin(), buf.end(), 0);
        f.read(reinterpret_cast<char*>(buf.data()), block_size);
        out[b] = decode_block(buf, b);
    }
    return out;
}

}   // namespace nbdsched::reliability
