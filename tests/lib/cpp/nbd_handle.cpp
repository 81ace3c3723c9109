#include "nbd_handle.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "pattern.hpp"

namespace nbdsched::testlib {

Nbd::Nbd() : h_(nbd_create()) {
    if (!h_) throw std::runtime_error("nbd_create: " + nbd_error());
}

Nbd::~Nbd() {
    if (h_) nbd_close(h_);
}

Nbd connect(const std::string& uri) {
    Nbd h;
    if (nbd_connect_uri(h, uri.c_str()) != 0)
        throw std::runtime_error("connect " + uri + ": " + nbd_error());
    return h;
}

Nbd connect(const std::string& uri, bool structured_replies) {
    Nbd h;
    if (nbd_set_request_structured_replies(h, structured_replies) != 0 ||
        nbd_connect_uri(h, uri.c_str()) != 0)
        throw std::runtime_error("connect " + uri + ": " + nbd_error());
    return h;
}

std::string nbd_error() {
    const char* msg = nbd_get_error();
    return std::string(msg ? msg : "(no message)") + " [errno " +
           std::to_string(nbd_get_errno()) + " " + std::strerror(nbd_get_errno()) + "]";
}

std::string verify_pattern(nbd_handle* h, std::size_t len, std::uint64_t offset,
                           std::uint32_t seed) {
    std::vector<std::uint8_t> got(len);
    if (nbd_pread(h, got.data(), len, offset, 0) != 0)
        return "pread(" + std::to_string(len) + " @ " + std::to_string(offset) +
               ") failed: " + nbd_error();
    auto want = pattern(offset, len, seed);
    auto diff = std::mismatch(got.begin(), got.end(), want.begin());
    if (diff.first == got.end()) return "";
    std::size_t at = static_cast<std::size_t>(diff.first - got.begin());
    return "data differs at offset " + std::to_string(offset + at) + " (read " +
           std::to_string(got[at]) + ", expected " + std::to_string(want[at]) + ")";
}

int write_pattern(nbd_handle* h, std::size_t len, std::uint64_t offset, std::uint32_t seed,
                  std::uint32_t flags) {
    auto data = pattern(offset, len, seed);
    return nbd_pwrite(h, data.data(), len, offset, flags);
}

bool reads_zero(nbd_handle* h, std::size_t len, std::uint64_t offset) {
    std::vector<std::uint8_t> got(len, 0xff);
    if (nbd_pread(h, got.data(), len, offset, 0) != 0)
        throw std::runtime_error("pread failed: " + nbd_error());
    return std::all_of(got.begin(), got.end(), [](std::uint8_t b) { return b == 0; });
}

}   // namespace nbdsched::testlib
