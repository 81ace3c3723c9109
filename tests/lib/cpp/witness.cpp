#include "witness.hpp"

#include <chrono>
#include <stdexcept>

#include "nbd_handle.hpp"

namespace nbdsched::testlib {

Witness::Witness(const std::string& uri, std::uint64_t offset)
    : thread_([this, uri, offset] { run(uri, offset); }) {}

Witness::~Witness() { finish(); }

void Witness::finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
}

bool Witness::advances() {
    const long target = rounds_ + 2;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (!failed_ && std::chrono::steady_clock::now() < deadline) {
        if (rounds_ >= target) return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

std::string Witness::error() const { return failed_ ? error_ : ""; }

void Witness::run(std::string uri, std::uint64_t offset) {
    try {
        Nbd h = connect(uri);
        for (std::uint32_t i = 0; !stop_; ++i) {
            const std::uint64_t off = offset + (i % 64) * 65536 + i % 7;
            if (write_pattern(h, 65536, off, i) != 0)
                throw std::runtime_error("witness write: " + nbd_error());
            if (auto e = verify_pattern(h, 65536, off, i); !e.empty())
                throw std::runtime_error("witness verify: " + e);
            ++rounds_;
        }
    } catch (const std::exception& e) {
        error_ = e.what();
        failed_ = true;
    }
}

}   // namespace nbdsched::testlib
