#include "nbd/transmission.hpp"

#include <cerrno>

#include "nbd/wire.hpp"

namespace nbdsched::nbd {

[[gnu::hot]] std::optional<RequestHeader> decode_request(std::span<const std::uint8_t, request_size> bytes) {
    const std::uint8_t* p = bytes.data();
    if (load_u32(p) != request_magic) return std::nullopt;
    RequestHeader r;
    r.flags = load_u16(p + 4);
    r.type = load_u16(p + 6);
    r.cookie = load_u64(p + 8);
    r.offset = load_u64(p + 16);
    r.length = load_u32(p + 24);
    return r;
}

std::array<std::uint8_t, request_size> encode_request(const RequestHeader& r) {
    std::array<std::uint8_t, request_size> out{};
    std::uint8_t* p = out.data();
    store_u32(p, request_magic);
    store_u16(p + 4, r.flags);
    store_u16(p + 6, r.type);
    store_u64(p + 8, r.cookie);
    store_u64(p + 16, r.offset);
    store_u32(p + 24, r.length);
    return out;
}

[[gnu::hot]] std::size_t encode_simple_reply(std::span<std::uint8_t> out, std::uint32_t error, std::uint64_t cookie) {
    store_u32(out.data(), simple_reply_magic);
    store_u32(out.data() + 4, error);
    store_u64(out.data() + 8, cookie);
    return simple_reply_size;
}

std::optional<SimpleReply> decode_simple_reply(std::span<const std::uint8_t, simple_reply_size> bytes) {
    if (load_u32(bytes.data()) != simple_reply_magic) return std::nullopt;
    return SimpleReply{load_u32(bytes.data() + 4), load_u64(bytes.data() + 8)};
}

std::size_t encode_chunk_header(std::span<std::uint8_t> out, std::uint16_t flags, std::uint16_t type,
                                std::uint64_t cookie, std::uint32_t length) {
    std::uint8_t* p = out.data();
    store_u32(p, structured_reply_magic);
    store_u16(p + 4, flags);
    store_u16(p + 6, type);
    store_u64(p + 8, cookie);
    store_u32(p + 16, length);
    return structured_reply_size;
}

std::size_t encode_offset_data(std::span<std::uint8_t> out, std::uint64_t cookie, std::uint64_t offset,
                               std::uint32_t data_length) {
    auto n = encode_chunk_header(out, reply_flag_done, chunk_offset_data, cookie, data_length + 8);
    store_u64(out.data() + n, offset);
    return n + 8;
}

std::size_t encode_error_chunk(std::span<std::uint8_t> out, std::uint64_t cookie, std::uint32_t error) {
    auto n = encode_chunk_header(out, reply_flag_done, chunk_error, cookie, 6);
    store_u32(out.data() + n, error);
    store_u16(out.data() + n + 4, 0);
    return n + 6;
}

std::size_t encode_none_chunk(std::span<std::uint8_t> out, std::uint64_t cookie) {
    return encode_chunk_header(out, reply_flag_done, chunk_none, cookie, 0);
}

[[gnu::hot]] std::size_t encode_reply(std::span<std::uint8_t> out, bool structured, const RequestHeader& request,
                                      std::uint32_t error) {
    const bool read = request.type == static_cast<std::uint16_t>(Command::read);
    // With structured replies "a simple reply MAY be used as a reply to any
    // request other than NBD_CMD_READ, but only if the reply has no data
    // payload" (doc/proto.md, "Simple reply message"), as nbdkit does: a
    // client reads a simple reply in one piece, where libnbd reads a chunk
    // header in two (its first 16 bytes, then the rest), one recv more per
    // WRITE acknowledged. Errors keep their ERROR chunk.
    if (!structured || (error == 0 && !read)) return encode_simple_reply(out, error, request.cookie);
    if (error != 0) return encode_error_chunk(out, request.cookie, error);
    // A content chunk must describe at least one byte: an empty read ends
    // with a NONE chunk instead.
    if (request.length > 0) return encode_offset_data(out, request.cookie, request.offset, request.length);
    return encode_none_chunk(out, request.cookie);
}

[[gnu::hot]] std::uint32_t validate_request(const RequestHeader& r, const ExportLimits& limits) {
    // FUA is valid on every command (the spec says to accept and ignore it
    // where it means nothing); the others only where documented.
    std::uint16_t allowed = cmd_flag_fua;
    bool writes = false;
    bool has_range = true;
    switch (static_cast<Command>(r.type)) {
    case Command::read:
        if (limits.structured) allowed |= cmd_flag_df;
        break;
    case Command::write:
    case Command::trim:
        writes = true;
        break;
    case Command::write_zeroes:
        writes = true;
        allowed |= cmd_flag_no_hole | cmd_flag_fast_zero;
        break;
    case Command::cache:
        break;
    case Command::block_status:
        // Block status replies are structured chunks: without structured
        // replies there is no way to answer, whatever the context says.
        if (!limits.block_status || !limits.structured || r.length == 0) return err_inval;
        allowed |= cmd_flag_req_one;
        break;
    case Command::flush:
    case Command::disc:
        has_range = false;   // offset/length are reserved: not checked
        break;
    default:
        return err_inval;
    }
    if (r.flags & ~allowed) return err_inval;
    if (writes && limits.read_only) return err_perm;
    const bool payload = r.type == static_cast<std::uint16_t>(Command::read) || has_payload(r);
    // EOVERFLOW only for a READ (no request payload) and only with structured
    // replies, as the spec asks; an oversize WRITE is EINVAL.
    if (payload && r.length > limits.max_payload)
        return limits.structured && !has_payload(r) ? err_overflow : err_inval;
    if (!has_range) return 0;
    const bool past_end = r.offset > limits.size || r.length > limits.size - r.offset;
    if (past_end) {
        bool grows = r.type == static_cast<std::uint16_t>(Command::write) ||
                     r.type == static_cast<std::uint16_t>(Command::write_zeroes);
        return grows ? err_nospc : err_inval;
    }
    return 0;
}

std::uint32_t errno_to_nbd(int err) {
    switch (err) {
    case 0: return 0;
    case EPERM:
    case EROFS: return err_perm;
    case ENOMEM: return err_nomem;
    case EINVAL: return err_inval;
    case ENOSPC:
    case EDQUOT:
    case EFBIG: return err_nospc;
    case EOVERFLOW: return err_overflow;
    case ENOTSUP: return err_notsup;
    case ESHUTDOWN: return err_shutdown;
    default: return err_io;
    }
}

std::string_view command_name(std::uint16_t type) {
    switch (static_cast<Command>(type)) {
    case Command::read: return "READ";
    case Command::write: return "WRITE";
    case Command::disc: return "DISC";
    case Command::flush: return "FLUSH";
    case Command::trim: return "TRIM";
    case Command::cache: return "CACHE";
    case Command::write_zeroes: return "WRITE_ZEROES";
    case Command::block_status: return "BLOCK_STATUS";
    }
    return "unknown";
}

}   // namespace nbdsched::nbd
