// Small RAII helpers over the libnbd C API, and pattern checks through it.
#pragma once

#include <libnbd.h>

#include <cstdint>
#include <string>

namespace nbdsched::testlib {

// Owns an nbd_handle; closing it disconnects.
class Nbd {
public:
    Nbd();
    ~Nbd();
    Nbd(const Nbd&) = delete;
    Nbd& operator=(const Nbd&) = delete;
    Nbd(Nbd&& o) noexcept : h_(o.h_) { o.h_ = nullptr; }
    nbd_handle* get() const { return h_; }
    operator nbd_handle*() const { return h_; }

private:
    nbd_handle* h_;
};

// A connected handle (throws std::runtime_error with libnbd's message).
Nbd connect(const std::string& uri);
// The same, asking for structured replies or not.
Nbd connect(const std::string& uri, bool structured_replies);

// libnbd's last error message and errno for this thread.
std::string nbd_error();

// Reads [offset, offset+len) and compares it with pattern(offset, len, seed);
// returns "" when equal, else a description of the first difference or the error.
std::string verify_pattern(nbd_handle* h, std::size_t len, std::uint64_t offset,
                           std::uint32_t seed);
// Writes pattern(offset, len, seed); returns libnbd's result (0 or -1).
int write_pattern(nbd_handle* h, std::size_t len, std::uint64_t offset, std::uint32_t seed,
                  std::uint32_t flags = 0);

// True when all bytes of [offset, offset+len) read as zero (throws on error).
bool reads_zero(nbd_handle* h, std::size_t len, std::uint64_t offset);

}   // namespace nbdsched::testlib
