// NBD_CMD_BLOCK_STATUS replies for base:allocation: the NBD_REPLY_TYPE_BLOCK_STATUS
// chunk (header, context id, then one 8-byte descriptor per extent: u32
// length, u32 NBD_STATE_* flags). Pure: the extents come from the caller.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "nbd/constants.hpp"

namespace nbdsched::nbd {

struct BlockExtent {
    std::uint64_t length = 0;
    std::uint32_t flags = 0;   // state_hole | state_zero
};

inline constexpr std::size_t block_descriptor_size = 8;
// Chunk header plus the context id: what precedes the descriptors.
inline constexpr std::size_t block_status_header_size = structured_reply_size + 4;

// Writes the descriptors for a request of `request_length` bytes into `out`
// and returns the bytes written: extents are merged when their flags agree,
// empty ones skipped, the total clipped to the request, at most
// out.size() / 8 descriptors (one with NBD_CMD_FLAG_REQ_ONE). 0 when the
// extents describe nothing (the caller then answers with an error: a
// successful reply must describe at least one byte).
std::size_t encode_block_descriptors(std::span<std::uint8_t> out, std::span<const BlockExtent> extents,
                                     std::uint32_t request_length, bool req_one);

// The chunk header (DONE set) and context id for `descriptor_bytes` of
// descriptors; `out` holds at least block_status_header_size bytes.
std::size_t encode_block_status_header(std::span<std::uint8_t> out, std::uint64_t cookie,
                                       std::uint32_t descriptor_bytes);

}   // namespace nbdsched::nbd
