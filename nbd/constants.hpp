// NBD protocol constants (NetworkBlockDevice/nbd doc/proto.md). Values only;
// encoding lives in handshake.hpp and transmission.hpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace nbdsched::nbd {

// Handshake magics.
inline constexpr std::uint64_t nbd_magic = 0x4e42444d41474943ull;   // "NBDMAGIC"
inline constexpr std::uint64_t ihaveopt = 0x49484156454f5054ull;    // "IHAVEOPT"
inline constexpr std::uint64_t option_reply_magic = 0x0003e889045565a9ull;

// Handshake flags (server) and client flags.
inline constexpr std::uint16_t flag_fixed_newstyle = 1u << 0;
inline constexpr std::uint16_t flag_no_zeroes = 1u << 1;
inline constexpr std::uint32_t flag_c_fixed_newstyle = 1u << 0;
inline constexpr std::uint32_t flag_c_no_zeroes = 1u << 1;

// Options.
enum class Option : std::uint32_t {
    export_name = 1,
    abort = 2,
    list = 3,
    peek_export = 4,
    starttls = 5,
    info = 6,
    go = 7,
    structured_reply = 8,
    list_meta_context = 9,
    set_meta_context = 10,
    extended_headers = 11,
};

// Option reply types.
inline constexpr std::uint32_t rep_ack = 1;
inline constexpr std::uint32_t rep_server = 2;
inline constexpr std::uint32_t rep_info = 3;
inline constexpr std::uint32_t rep_meta_context = 4;
inline constexpr std::uint32_t rep_flag_error = 1u << 31;
inline constexpr std::uint32_t rep_err_unsup = rep_flag_error | 1;
inline constexpr std::uint32_t rep_err_policy = rep_flag_error | 2;
inline constexpr std::uint32_t rep_err_invalid = rep_flag_error | 3;
inline constexpr std::uint32_t rep_err_platform = rep_flag_error | 4;
inline constexpr std::uint32_t rep_err_tls_reqd = rep_flag_error | 5;
inline constexpr std::uint32_t rep_err_unknown = rep_flag_error | 6;
inline constexpr std::uint32_t rep_err_shutdown = rep_flag_error | 7;
inline constexpr std::uint32_t rep_err_block_size_reqd = rep_flag_error | 8;
inline constexpr std::uint32_t rep_err_too_big = rep_flag_error | 9;

// NBD_INFO_* items of NBD_REP_INFO.
inline constexpr std::uint16_t info_export = 0;
inline constexpr std::uint16_t info_name = 1;
inline constexpr std::uint16_t info_description = 2;
inline constexpr std::uint16_t info_block_size = 3;

// Transmission flags.
inline constexpr std::uint16_t tflag_has_flags = 1u << 0;
inline constexpr std::uint16_t tflag_read_only = 1u << 1;
inline constexpr std::uint16_t tflag_send_flush = 1u << 2;
inline constexpr std::uint16_t tflag_send_fua = 1u << 3;
inline constexpr std::uint16_t tflag_rotational = 1u << 4;
inline constexpr std::uint16_t tflag_send_trim = 1u << 5;
inline constexpr std::uint16_t tflag_send_write_zeroes = 1u << 6;
inline constexpr std::uint16_t tflag_send_df = 1u << 7;
inline constexpr std::uint16_t tflag_can_multi_conn = 1u << 8;
inline constexpr std::uint16_t tflag_send_cache = 1u << 10;
inline constexpr std::uint16_t tflag_send_fast_zero = 1u << 11;

// Transmission magics.
inline constexpr std::uint32_t request_magic = 0x25609513u;
inline constexpr std::uint32_t simple_reply_magic = 0x67446698u;
inline constexpr std::uint32_t structured_reply_magic = 0x668e33efu;

// Commands and command flags.
enum class Command : std::uint16_t {
    read = 0,
    write = 1,
    disc = 2,
    flush = 3,
    trim = 4,
    cache = 5,
    write_zeroes = 6,
    block_status = 7,
};
inline constexpr std::uint16_t cmd_flag_fua = 1u << 0;
inline constexpr std::uint16_t cmd_flag_no_hole = 1u << 1;
inline constexpr std::uint16_t cmd_flag_df = 1u << 2;
inline constexpr std::uint16_t cmd_flag_req_one = 1u << 3;
inline constexpr std::uint16_t cmd_flag_fast_zero = 1u << 4;

// Structured reply flags and chunk types.
inline constexpr std::uint16_t reply_flag_done = 1u << 0;
inline constexpr std::uint16_t chunk_none = 0;
inline constexpr std::uint16_t chunk_offset_data = 1;
inline constexpr std::uint16_t chunk_offset_hole = 2;
inline constexpr std::uint16_t chunk_block_status = 5;
inline constexpr std::uint16_t chunk_error = (1u << 15) + 1;
inline constexpr std::uint16_t chunk_error_offset = (1u << 15) + 2;

// Metadata contexts: the one this server knows, the id it answers with in
// NBD_REP_META_CONTEXT and NBD_REPLY_TYPE_BLOCK_STATUS (any u32 the server
// picks), and its status flags (NBD_STATE_HOLE, NBD_STATE_ZERO).
inline constexpr std::string_view base_allocation = "base:allocation";
inline constexpr std::uint32_t base_allocation_id = 1;
inline constexpr std::uint32_t state_hole = 1u << 0;
inline constexpr std::uint32_t state_zero = 1u << 1;

// Error values on the wire (not the host's errno).
inline constexpr std::uint32_t err_perm = 1;
inline constexpr std::uint32_t err_io = 5;
inline constexpr std::uint32_t err_nomem = 12;
inline constexpr std::uint32_t err_inval = 22;
inline constexpr std::uint32_t err_nospc = 28;
inline constexpr std::uint32_t err_overflow = 75;
inline constexpr std::uint32_t err_notsup = 95;
inline constexpr std::uint32_t err_shutdown = 108;

// Fixed sizes on the wire.
inline constexpr std::size_t greeting_size = 18;        // magic, ihaveopt, flags
inline constexpr std::size_t option_header_size = 16;   // ihaveopt, option, length
inline constexpr std::size_t option_reply_header_size = 20;
inline constexpr std::size_t export_name_reply_size = 10;   // size, flags (+124 zeroes)
inline constexpr std::size_t export_name_zeroes = 124;
inline constexpr std::size_t request_size = 28;
inline constexpr std::size_t simple_reply_size = 16;
inline constexpr std::size_t structured_reply_size = 20;

// Strings (export names, descriptions) are at most 4096 bytes by the spec.
inline constexpr std::size_t max_string = 4096;

}   // namespace nbdsched::nbd
