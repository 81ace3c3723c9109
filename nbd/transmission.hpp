// Encoding and decoding of the transmission phase: request headers, simple
// replies, structured reply chunks, and the per-request validation the spec
// asks of a server. Pure functions over bytes.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>

#include "nbd/constants.hpp"

namespace nbdsched::nbd {

struct RequestHeader {
    std::uint16_t flags = 0;
    std::uint16_t type = 0;
    std::uint64_t cookie = 0;
    std::uint64_t offset = 0;
    std::uint32_t length = 0;
};

// nullopt when the magic is wrong (a malformed stream: close the connection).
std::optional<RequestHeader> decode_request(std::span<const std::uint8_t, request_size> bytes);
std::array<std::uint8_t, request_size> encode_request(const RequestHeader& r);

// A simple reply as a client reads it; a successful READ's data follows it.
struct SimpleReply {
    std::uint32_t error = 0;
    std::uint64_t cookie = 0;
};

// nullopt when the magic is not a simple reply's (a structured chunk, or a
// broken stream).
std::optional<SimpleReply> decode_simple_reply(std::span<const std::uint8_t, simple_reply_size> bytes);

// The largest reply header the server writes before a payload: a structured
// OFFSET_DATA chunk header plus its offset field.
inline constexpr std::size_t max_reply_header = structured_reply_size + 8;

// Each encoder writes into `out` (at least max_reply_header bytes) and returns
// the number of bytes written; a READ's data follows the header on the wire.
std::size_t encode_simple_reply(std::span<std::uint8_t> out, std::uint32_t error, std::uint64_t cookie);
std::size_t encode_chunk_header(std::span<std::uint8_t> out, std::uint16_t flags, std::uint16_t type,
                                std::uint64_t cookie, std::uint32_t length);
// OFFSET_DATA header with DONE set; `data_length` bytes must follow (>= 1).
std::size_t encode_offset_data(std::span<std::uint8_t> out, std::uint64_t cookie, std::uint64_t offset,
                               std::uint32_t data_length);
// ERROR chunk with DONE set and no message.
std::size_t encode_error_chunk(std::span<std::uint8_t> out, std::uint64_t cookie, std::uint32_t error);
// NONE chunk with DONE set (success without data).
std::size_t encode_none_chunk(std::span<std::uint8_t> out, std::uint64_t cookie);

// Picks the right reply for a finished request: for a successful READ the
// caller sends `data_length` bytes after the returned header. Structured
// replies answer READs and errors; other successes get a simple reply.
std::size_t encode_reply(std::span<std::uint8_t> out, bool structured, const RequestHeader& request,
                         std::uint32_t error);

// What the server knows about the export a request is for.
struct ExportLimits {
    std::uint64_t size = 0;
    bool read_only = false;
    bool structured = false;                 // structured replies negotiated
    bool block_status = false;               // base:allocation selected for this export
    std::uint32_t max_payload = 32u << 20;   // NBD_INFO_BLOCK_SIZE maximum
};

// 0 when the request may go to the device, else the NBD error to reply with
// (a WRITE's payload must still be consumed). Spec order: unknown command or
// flag -> EINVAL, write to a read-only export -> EPERM, payload over the
// maximum -> EOVERFLOW (EINVAL without structured replies), out of range ->
// EINVAL (ENOSPC for writes). BLOCK_STATUS without a selected metadata
// context, or of length 0, is EINVAL.
std::uint32_t validate_request(const RequestHeader& r, const ExportLimits& limits);

// True when a WRITE payload of this length follows the header on the wire.
inline bool has_payload(const RequestHeader& r) {
    return r.type == static_cast<std::uint16_t>(Command::write);
}

// Host errno from a backend -> NBD error value.
std::uint32_t errno_to_nbd(int err);

std::string_view command_name(std::uint16_t type);

}   // namespace nbdsched::nbd
