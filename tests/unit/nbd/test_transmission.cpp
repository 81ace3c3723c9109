#include <doctest/doctest.h>

#include <cerrno>

#include "nbd/transmission.hpp"
#include "nbd/wire.hpp"

using namespace nbdsched::nbd;

namespace {
RequestHeader req(Command c, std::uint64_t offset, std::uint32_t length, std::uint16_t flags = 0) {
    RequestHeader r;
    r.type = static_cast<std::uint16_t>(c);
    r.offset = offset;
    r.length = length;
    r.flags = flags;
    r.cookie = 0x1122334455667788ull;
    return r;
}
constexpr std::uint64_t MiB = 1 << 20;
}   // namespace

TEST_CASE("request round trip and bad magic") {
    auto r = req(Command::write, 12345, 4096, cmd_flag_fua);
    auto bytes = encode_request(r);
    auto d = decode_request(bytes);
    REQUIRE(d);
    CHECK(d->type == r.type);
    CHECK(d->flags == cmd_flag_fua);
    CHECK(d->cookie == r.cookie);
    CHECK(d->offset == 12345);
    CHECK(d->length == 4096);
    bytes[3] ^= 0xff;
    CHECK_FALSE(decode_request(bytes));
}

TEST_CASE("a simple reply decodes to what was encoded; a structured chunk does not") {
    std::uint8_t out[max_reply_header];
    std::span<const std::uint8_t, simple_reply_size> head(out, simple_reply_size);
    encode_simple_reply(out, 5, 0x0102030405060708ull);
    auto d = decode_simple_reply(head);
    REQUIRE(d);
    CHECK(d->error == 5);
    CHECK(d->cookie == 0x0102030405060708ull);
    encode_none_chunk(out, 7);
    CHECK_FALSE(decode_simple_reply(head));
}

TEST_CASE("simple and structured replies") {
    std::uint8_t out[max_reply_header];
    auto r = req(Command::read, 4096, 512);
    CHECK(encode_reply(out, false, r, 0) == simple_reply_size);
    CHECK(load_u32(out) == simple_reply_magic);
    CHECK(load_u32(out + 4) == 0);
    CHECK(load_u64(out + 8) == r.cookie);

    CHECK(encode_reply(out, true, r, 0) == structured_reply_size + 8);
    CHECK(load_u32(out) == structured_reply_magic);
    CHECK(load_u16(out + 4) == reply_flag_done);
    CHECK(load_u16(out + 6) == chunk_offset_data);
    CHECK(load_u64(out + 8) == r.cookie);
    CHECK(load_u32(out + 16) == 512 + 8);
    CHECK(load_u64(out + 20) == 4096);

    CHECK(encode_reply(out, true, r, err_io) == structured_reply_size + 6);
    CHECK(load_u16(out + 6) == chunk_error);
    CHECK(load_u32(out + 16) == 6);
    CHECK(load_u32(out + 20) == err_io);

    auto empty = req(Command::read, 0, 0);
    CHECK(encode_reply(out, true, empty, 0) == structured_reply_size);
    CHECK(load_u32(out) == structured_reply_magic);
    CHECK(load_u16(out + 6) == chunk_none);
    CHECK(load_u32(out + 16) == 0);
}

TEST_CASE("with structured replies, commands other than READ succeed with a simple reply and fail with a chunk") {
    std::uint8_t out[max_reply_header];
    for (auto c : {Command::write, Command::flush, Command::trim, Command::write_zeroes, Command::cache}) {
        CAPTURE(static_cast<int>(c));
        auto r = req(c, 4096, 512);
        CHECK(encode_reply(out, true, r, 0) == simple_reply_size);
        CHECK(load_u32(out) == simple_reply_magic);
        CHECK(load_u32(out + 4) == 0);
        CHECK(load_u64(out + 8) == r.cookie);

        CHECK(encode_reply(out, true, r, err_nospc) == structured_reply_size + 6);
        CHECK(load_u32(out) == structured_reply_magic);
        CHECK(load_u16(out + 6) == chunk_error);
        CHECK(load_u32(out + 20) == err_nospc);
    }
}

TEST_CASE("validation follows the spec's error table") {
    ExportLimits l;
    l.size = 10 * MiB;
    CHECK(validate_request(req(Command::read, 0, 4096), l) == 0);
    CHECK(validate_request(req(Command::read, 10 * MiB - 1, 1), l) == 0);
    CHECK(validate_request(req(Command::read, 10 * MiB, 0), l) == 0);
    CHECK(validate_request(req(Command::read, 10 * MiB, 1), l) == err_inval);
    CHECK(validate_request(req(Command::write, 10 * MiB - 1, 2), l) == err_nospc);
    CHECK(validate_request(req(Command::write_zeroes, 10 * MiB, 4096), l) == err_nospc);
    CHECK(validate_request(req(Command::trim, 10 * MiB, 4096), l) == err_inval);
    // Offset + length overflowing 64 bits is out of range, not a wrap-around.
    CHECK(validate_request(req(Command::read, ~0ull - 10, 4096), l) == err_inval);
    CHECK(validate_request(req(Command::write, ~0ull, 1), l) == err_nospc);
    // Unknown commands and flags.
    RequestHeader unknown = req(Command::read, 0, 0);
    unknown.type = 42;
    CHECK(validate_request(unknown, l) == err_inval);
    CHECK(validate_request(req(Command::cache, 0, 512), l) == 0);   // advisory, on every export
    CHECK(validate_request(req(Command::cache, 10 * MiB, 1), l) == err_inval);
    CHECK(validate_request(req(Command::block_status, 0, 512), l) == err_inval);   // no context selected
    CHECK(validate_request(req(Command::read, 0, 512, 1u << 9), l) == err_inval);
    CHECK(validate_request(req(Command::write, 0, 512, cmd_flag_no_hole), l) == err_inval);
    CHECK(validate_request(req(Command::write_zeroes, 0, 512, cmd_flag_no_hole | cmd_flag_fua), l) == 0);
    CHECK(validate_request(req(Command::read, 0, 512, cmd_flag_df), l) == err_inval);
    CHECK(validate_request(req(Command::flush, 0, 0, cmd_flag_fua), l) == 0);
    // DF is valid once structured replies are on.
    l.structured = true;
    CHECK(validate_request(req(Command::read, 0, 512, cmd_flag_df), l) == 0);
}

TEST_CASE("read-only exports refuse writes with EPERM") {
    ExportLimits l;
    l.size = MiB;
    l.read_only = true;
    CHECK(validate_request(req(Command::write, 0, 512), l) == err_perm);
    CHECK(validate_request(req(Command::trim, 0, 512), l) == err_perm);
    CHECK(validate_request(req(Command::write_zeroes, 0, 512), l) == err_perm);
    CHECK(validate_request(req(Command::read, 0, 512), l) == 0);
    CHECK(validate_request(req(Command::flush, 0, 0), l) == 0);
}

TEST_CASE("payloads over the maximum: EOVERFLOW for a READ with structured replies, else EINVAL") {
    ExportLimits l;
    l.size = 1ull << 40;
    CHECK(validate_request(req(Command::read, 0, 32 * MiB), l) == 0);
    CHECK(validate_request(req(Command::read, 0, 32 * MiB + 1), l) == err_inval);
    CHECK(validate_request(req(Command::write, 0, 64 * MiB), l) == err_inval);
    l.structured = true;
    CHECK(validate_request(req(Command::read, 0, 32 * MiB + 1), l) == err_overflow);
    CHECK(validate_request(req(Command::write, 0, 32 * MiB + 1), l) == err_inval);
    // No payload: a large trim or zero is fine.
    CHECK(validate_request(req(Command::trim, 0, 0xffffffffu), l) == 0);
    CHECK(validate_request(req(Command::write_zeroes, 0, 0xffffffffu), l) == 0);
}

TEST_CASE("errno mapping") {
    CHECK(errno_to_nbd(0) == 0);
    CHECK(errno_to_nbd(ENOSPC) == err_nospc);
    CHECK(errno_to_nbd(EDQUOT) == err_nospc);
    CHECK(errno_to_nbd(EIO) == err_io);
    CHECK(errno_to_nbd(EBADF) == err_io);
    CHECK(errno_to_nbd(EROFS) == err_perm);
}
