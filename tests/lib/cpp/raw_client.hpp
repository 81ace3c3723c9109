// A hand-made blocking NBD client on a unix socket, for sending exactly the
// bytes a test wants, which libnbd never would: pipelining, garbage,
// truncated packets, bad magic, absurd lengths. Well-formed messages are
// built with the daemon's own codec (nbd/); reads give up after 30 s, so a
// hung server fails the test instead of hanging it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nbd/handshake.hpp"
#include "nbd/transmission.hpp"

namespace nbdsched::testlib {

// NBD command codes as RawClient::send and request() take them.
constexpr auto READ = static_cast<std::uint16_t>(nbd::Command::read);
constexpr auto WRITE = static_cast<std::uint16_t>(nbd::Command::write);
constexpr auto FLUSH = static_cast<std::uint16_t>(nbd::Command::flush);
constexpr auto TRIM = static_cast<std::uint16_t>(nbd::Command::trim);
constexpr auto ZEROES = static_cast<std::uint16_t>(nbd::Command::write_zeroes);
constexpr auto DISC = static_cast<std::uint16_t>(nbd::Command::disc);

struct Reply {
    std::uint64_t cookie = 0;
    std::uint32_t error = 0;
    std::vector<std::uint8_t> data;   // READ data (simple or OFFSET_DATA)
    bool simple = false;              // a simple reply, not structured chunks
};

class RawClient {
public:
    explicit RawClient(const std::string& unix_socket);   // throws when refused
    ~RawClient();
    RawClient(const RawClient&) = delete;
    RawClient& operator=(const RawClient&) = delete;

    // Raw bytes. send() throws on an error, send_raw() ignores it (the
    // server may already have closed); recv() returns exactly n bytes or
    // throws, read_exact() returns false instead.
    void send(const std::vector<std::uint8_t>& bytes);
    void send_raw(const void* data, std::size_t n);
    std::vector<std::uint8_t> recv(std::size_t n);
    bool read_exact(void* data, std::size_t n);
    // True when the server closes without sending anything more.
    bool closed_by_server();
    // Reads and discards until the server closes; false if it has not after 30 s.
    bool wait_closed();
    void close_now();

    // Handshake, step by step: the greeting answered with fixed-newstyle
    // client flags (returns the server's handshake flags); then
    // NBD_OPT_EXPORT_NAME (returns the export size).
    std::uint16_t greet();
    std::uint64_t open_export(const std::string& name);
    // An option with its payload, and the next option reply (throws on bad magic).
    void send_option(std::uint32_t option, const std::vector<std::uint8_t>& data);
    nbd::OptionReply recv_option_reply();
    // The whole handshake: greeting, optional structured replies, then GO.
    // False on failure.
    bool handshake(const std::string& export_name, bool structured);
    std::uint64_t size() const { return size_; }
    std::uint16_t flags() const { return flags_; }
    bool structured() const { return structured_; }

    // Transmission. A 28-byte request header (any magic, to send a bad one).
    static std::vector<std::uint8_t> request(std::uint16_t type, std::uint64_t cookie,
                                             std::uint64_t offset, std::uint32_t length,
                                             std::uint16_t flags = 0,
                                             std::uint32_t magic = nbd::request_magic);
    void send(std::uint16_t type, std::uint64_t cookie, std::uint64_t offset, std::uint32_t length,
              std::uint16_t flags = 0, const std::vector<std::uint8_t>& payload = {});
    // A simple reply header; returns its error (throws on bad magic or when
    // the cookie does not match).
    std::uint32_t recv_simple_reply(std::uint64_t cookie);
    // The next reply, simple or structured; nullopt on EOF or a protocol
    // error. Simple replies carry no length: `read_length` is the READ's
    // (with structured replies, a simple reply with a length is an error).
    std::optional<Reply> receive(std::uint32_t read_length);

private:
    // Waits up to 30 s for data or EOF; false on a timeout or error.
    bool readable();

    int fd_ = -1;
    bool no_zeroes_ = false;
    bool structured_ = false;
    std::uint64_t size_ = 0;
    std::uint16_t flags_ = 0;
};

}   // namespace nbdsched::testlib
