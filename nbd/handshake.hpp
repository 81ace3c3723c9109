// Encoding and decoding of the fixed newstyle handshake messages: the
// server greeting, client flags, option headers and payloads, option replies.
// Pure functions over bytes; the option logic itself is in negotiation.hpp.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nbd/constants.hpp"

namespace nbdsched::nbd {

// S: NBDMAGIC, IHAVEOPT, handshake flags.
std::array<std::uint8_t, greeting_size> encode_greeting(std::uint16_t handshake_flags);

struct ClientFlags {
    bool fixed_newstyle = false;
    bool no_zeroes = false;
};
// nullopt when the client set a flag we did not offer (the server must close).
std::optional<ClientFlags> decode_client_flags(std::span<const std::uint8_t, 4> bytes,
                                               std::uint16_t offered_handshake_flags);

struct OptionHeader {
    std::uint32_t option = 0;
    std::uint32_t length = 0;
};
// nullopt when the magic is not IHAVEOPT.
std::optional<OptionHeader> decode_option_header(std::span<const std::uint8_t, option_header_size> bytes);

// Client side encoders (used by tests and tools that talk to the server).
std::vector<std::uint8_t> encode_option(std::uint32_t option, std::span<const std::uint8_t> data);
std::vector<std::uint8_t> encode_info_request(std::string_view name, std::span<const std::uint16_t> infos);

// Payload of NBD_OPT_INFO / NBD_OPT_GO: export name and requested info items.
struct InfoRequest {
    std::string_view name;
    std::vector<std::uint16_t> infos;
};
// nullopt when the lengths inside do not add up to the option length.
std::optional<InfoRequest> decode_info_request(std::span<const std::uint8_t> data);

// Option replies, appended to `out` (a connection batches them in one write).
void append_reply_header(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint32_t type,
                         std::uint32_t length);
void append_ack(std::vector<std::uint8_t>& out, std::uint32_t option);
void append_error(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint32_t type,
                  std::string_view message);
void append_server(std::vector<std::uint8_t>& out, std::uint32_t option, std::string_view name,
                   std::string_view description);
void append_info_export(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint64_t size,
                        std::uint16_t transmission_flags);
void append_info_string(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint16_t info,
                        std::string_view text);   // NBD_INFO_NAME / NBD_INFO_DESCRIPTION
void append_info_block_size(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint32_t minimum,
                            std::uint32_t preferred, std::uint32_t maximum);
// The reply that ends NBD_OPT_EXPORT_NAME: size, flags and (unless the
// client negotiated NO_ZEROES) 124 bytes of zeroes.
void append_export_name_reply(std::vector<std::uint8_t>& out, std::uint64_t size,
                              std::uint16_t transmission_flags, bool no_zeroes);

// Decoded option reply (client side, for tests).
struct OptionReply {
    std::uint32_t option = 0;
    std::uint32_t type = 0;
    std::vector<std::uint8_t> data;
};
// Decodes one reply at the front of `in`; returns bytes consumed, 0 when
// incomplete, nullopt on a bad magic.
std::optional<std::size_t> decode_option_reply(std::span<const std::uint8_t> in, OptionReply& reply);

}   // namespace nbdsched::nbd
