// A hand-made NBD client on a raw socket, for sending what libnbd never would
// (garbage, truncated packets, bad magic, absurd lengths).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nbdsched::itest {

namespace nbd {
constexpr std::uint64_t k_opt_magic = 0x49484156454F5054ull;   // "IHAVEOPT"
constexpr std::uint32_t k_request_magic = 0x25609513;
constexpr std::uint32_t k_simple_reply_magic = 0x67446698;
constexpr std::uint32_t k_opt_export_name = 1;
constexpr std::uint32_t k_opt_go = 7;
constexpr std::uint16_t k_cmd_read = 0;
constexpr std::uint16_t k_cmd_write = 1;
constexpr std::uint16_t k_cmd_disc = 2;
} // namespace nbd

class RawConn {
public:
    explicit RawConn(const std::string& unix_socket);   // throws when refused
    ~RawConn();
    RawConn(const RawConn&) = delete;
    RawConn& operator=(const RawConn&) = delete;

    void send(const std::vector<std::uint8_t>& bytes);   // throws on error
    // Exactly n bytes, or throws (closed, error, or nothing for a long time).
    std::vector<std::uint8_t> recv(std::size_t n);
    // Reads and discards until the peer closes; false if it has not closed
    // after a generous timeout.
    bool wait_closed();
    void close_now();

    // Reads the greeting and answers with fixed-newstyle client flags; returns
    // the server's handshake flags.
    std::uint16_t greet();
    // greet() + NBD_OPT_EXPORT_NAME; returns the export size.
    std::uint64_t open_export(const std::string& name);
    // A 28-byte transmission request header.
    static std::vector<std::uint8_t> request(std::uint16_t type, std::uint64_t handle,
                                             std::uint64_t offset, std::uint32_t length,
                                             std::uint16_t flags = 0,
                                             std::uint32_t magic = nbd::k_request_magic);
    // Reads a simple reply header; returns its error (throws on bad magic or
    // when the handle does not match).
    std::uint32_t recv_simple_reply(std::uint64_t handle);

private:
    int fd_ = -1;
    bool no_zeroes_ = false;
};

void put_be(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes);
std::uint64_t get_be(const std::uint8_t* p, int bytes);

} // namespace nbdsched::itest
