// The client side of the fixed newstyle handshake, reduced to what a kernel
// attach needs: read the greeting, send the client flags and NBD_OPT_GO, read
// the replies into the export's size, flags and block sizes. Pure: the
// socket work is the caller's (kernel/connect.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nbd/constants.hpp"
#include "nbd/handshake.hpp"

namespace nbdsched::nbd {

// What NBD_OPT_GO told the client about the export.
struct GoResult {
    std::uint64_t size = 0;
    std::uint16_t flags = 0;   // transmission flags
    std::uint32_t min_block = 1;
    std::uint32_t preferred_block = 4096;
    std::uint32_t max_block = 32u << 20;
};

// The server's handshake flags; nullopt on a wrong magic or a server that is
// not fixed newstyle (an old-style server cannot answer NBD_OPT_GO).
std::optional<std::uint16_t> decode_greeting(std::span<const std::uint8_t, greeting_size> bytes);

// The client flags (fixed newstyle, and no-zeroes when offered) followed by
// NBD_OPT_GO for `name`, asking for NBD_INFO_BLOCK_SIZE.
std::vector<std::uint8_t> encode_go(std::uint16_t handshake_flags, std::string_view name);

// Reads the replies to NBD_OPT_GO one at a time.
class GoReplies {
public:
    enum class State { more,
                       done,
                       failed };
    State feed(const OptionReply& reply);
    const GoResult& result() const { return result_; }
    const std::string& error() const { return error_; }

private:
    State fail(std::string why);
    GoResult result_;
    bool have_export_ = false;
    std::string error_;
};

// "NBD_REP_ERR_POLICY" for a reply type, for messages.
std::string reply_type_name(std::uint32_t type);

}   // namespace nbdsched::nbd
