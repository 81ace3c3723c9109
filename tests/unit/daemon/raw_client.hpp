// A minimal blocking NBD client over a unix socket, built on the daemon's own
// protocol encoders, for tests that need to send exactly the bytes they want
// (pipelining, malformed packets, half-finished requests).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nbd/transmission.hpp"

namespace nbdsched::testing {

// NBD command codes as RawClient::send takes them.
constexpr auto READ = static_cast<std::uint16_t>(nbd::Command::read);
constexpr auto WRITE = static_cast<std::uint16_t>(nbd::Command::write);
constexpr auto FLUSH = static_cast<std::uint16_t>(nbd::Command::flush);
constexpr auto TRIM = static_cast<std::uint16_t>(nbd::Command::trim);
constexpr auto ZEROES = static_cast<std::uint16_t>(nbd::Command::write_zeroes);
constexpr auto DISC = static_cast<std::uint16_t>(nbd::Command::disc);

// n bytes of a pattern that differs per seed and per 512-byte sector.
std::vector<std::uint8_t> pattern(std::size_t n, std::uint8_t seed);

struct Reply {
    std::uint64_t cookie = 0;
    std::uint32_t error = 0;
    std::vector<std::uint8_t> data;   // READ data (simple or OFFSET_DATA)
};

class RawClient {
public:
    explicit RawClient(const std::string& socket_path);
    ~RawClient();
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;

    bool connected() const { return fd_ >= 0; }
    // Fixed newstyle, optional structured replies, then GO. False on failure.
    bool handshake(const std::string& export_name, bool structured);
    std::uint64_t size() const { return size_; }
    std::uint16_t flags() const { return flags_; }

    void send_raw(const void* data, std::size_t n);
    void send(std::uint16_t type, std::uint64_t cookie, std::uint64_t offset, std::uint32_t length,
              std::uint16_t flags = 0, const std::vector<std::uint8_t>& payload = {});
    // The next reply; nullopt on EOF or a protocol error. `lengths` maps a
    // READ's cookie to its length (simple replies carry no length).
    std::optional<Reply> receive(std::uint32_t read_length);
    // True once the server has closed the connection (reads EOF).
    bool closed_by_server();

    bool read_exact(void* data, std::size_t n);
    bool structured() const { return structured_; }

private:
    int fd_ = -1;
    bool structured_ = false;
    std::uint64_t size_ = 0;
    std::uint16_t flags_ = 0;
};

} // namespace nbdsched::testing
