// Fuzz target: the transmission phase. The input is a few bytes of export
// limits followed by raw 28-byte request headers as a client sends them.
// Each header that decodes must re-encode to the same bytes; validation must
// only pass requests the device can serve; and the reply encoder's output
// must decode back to the request's cookie and error (a simple reply through
// the client's decoder too).
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <vector>

#include "nbd/block_status.hpp"
#include "nbd/transmission.hpp"
#include "nbd/wire.hpp"
#include "tests/fuzz/check.hpp"
#include "tests/fuzz/input.hpp"

namespace {

using namespace nbdsched::nbd;

bool known_error(std::uint32_t e) {
    switch (e) {
    case 0:
    case err_perm:
    case err_io:
    case err_nomem:
    case err_inval:
    case err_nospc:
    case err_overflow:
    case err_notsup:
    case err_shutdown:
        return true;
    }
    return false;
}

void check_validation(const RequestHeader& r, const ExportLimits& limits, std::uint32_t error) {
    FUZZ_CHECK(known_error(error));
    if (error != 0) return;
    const auto type = static_cast<Command>(r.type);
    // Accepted: a command the device implements, with flags it understands.
    FUZZ_CHECK(type == Command::read || type == Command::write || type == Command::flush ||
               type == Command::trim || type == Command::write_zeroes || type == Command::disc ||
               type == Command::cache || type == Command::block_status);
    FUZZ_CHECK((r.flags & ~(cmd_flag_fua | cmd_flag_df | cmd_flag_no_hole | cmd_flag_fast_zero | cmd_flag_req_one)) ==
               0);
    if (r.flags & cmd_flag_fast_zero) FUZZ_CHECK(type == Command::write_zeroes);
    if (r.flags & cmd_flag_req_one) FUZZ_CHECK(type == Command::block_status);
    if (type == Command::block_status) FUZZ_CHECK(limits.block_status && limits.structured && r.length > 0);
    const bool writes = type == Command::write || type == Command::trim || type == Command::write_zeroes;
    FUZZ_CHECK(!(writes && limits.read_only));
    if (type == Command::read || type == Command::write) FUZZ_CHECK(r.length <= limits.max_payload);
    if (type != Command::flush && type != Command::disc) {
        // In range, without overflow: the backend never sees a bad range.
        FUZZ_CHECK(r.offset <= limits.size);
        FUZZ_CHECK(r.length <= limits.size - r.offset);
    }
}

void check_reply(const RequestHeader& r, const ExportLimits& limits, std::uint32_t error) {
    std::array<std::uint8_t, max_reply_header + 16> buf{};
    buf.fill(0xA5);
    const std::size_t n = encode_reply(std::span(buf).first(max_reply_header), limits.structured, r, error);
    FUZZ_CHECK(n >= simple_reply_size && n <= max_reply_header);
    for (std::size_t i = n; i < buf.size(); ++i) FUZZ_CHECK(buf[i] == 0xA5);   // no write past n
    const std::uint8_t* p = buf.data();
    const bool read = r.type == static_cast<std::uint16_t>(Command::read);
    if (!limits.structured || (error == 0 && !read)) {
        FUZZ_CHECK(n == simple_reply_size);
        FUZZ_CHECK(load_u32(p) == simple_reply_magic);
        FUZZ_CHECK(load_u32(p + 4) == error);
        FUZZ_CHECK(load_u64(p + 8) == r.cookie);
        const auto decoded = decode_simple_reply(std::span(buf).first<simple_reply_size>());
        FUZZ_CHECK(decoded && decoded->error == error && decoded->cookie == r.cookie);
        return;
    }
    FUZZ_CHECK(!decode_simple_reply(std::span(buf).first<simple_reply_size>()));   // a client tells them apart
    FUZZ_CHECK(load_u32(p) == structured_reply_magic);
    FUZZ_CHECK(load_u16(p + 4) == reply_flag_done);
    FUZZ_CHECK(load_u64(p + 8) == r.cookie);
    const std::uint16_t chunk = load_u16(p + 6);
    const std::uint32_t length = load_u32(p + 16);
    if (error != 0) {
        FUZZ_CHECK(chunk == chunk_error && length == 6 && n == structured_reply_size + 6);
        FUZZ_CHECK(load_u32(p + 20) == error);
    } else if (chunk == chunk_offset_data) {
        FUZZ_CHECK(read && r.length > 0);
        FUZZ_CHECK(length == r.length + 8u && n == structured_reply_size + 8);
        FUZZ_CHECK(load_u64(p + 20) == r.offset);
    } else {
        FUZZ_CHECK(chunk == chunk_none && length == 0 && n == structured_reply_size);
        FUZZ_CHECK(read && r.length == 0);
    }
}

// An accepted BLOCK_STATUS: descriptors for extents drawn from the input
// are merged, non-empty, within the request, and one with REQ_ONE.
void check_block_status(const RequestHeader& r, nbdsched::fuzz::Input& in) {
    std::vector<BlockExtent> extents(in.u8() % 12);
    for (auto& e : extents) {
        e.length = (in.u8() & 1) ? in.u64() : in.u16();
        e.flags = in.u8() & (state_hole | state_zero);
    }
    std::array<std::uint8_t, 8 * block_descriptor_size> out{};
    const std::size_t room = in.u8() % 9;
    const bool req_one = r.flags & cmd_flag_req_one;
    const auto n = encode_block_descriptors(std::span(out).first(room * block_descriptor_size), extents, r.length, req_one);
    FUZZ_CHECK(n % block_descriptor_size == 0 && n <= room * block_descriptor_size);
    if (req_one) FUZZ_CHECK(n <= block_descriptor_size);
    std::uint64_t total = 0;
    for (std::size_t i = 0; i < n; i += block_descriptor_size) {
        FUZZ_CHECK(load_u32(&out[i]) > 0);
        if (i > 0) FUZZ_CHECK(load_u32(&out[i + 4]) != load_u32(&out[i - 4]));
        total += load_u32(&out[i]);
    }
    FUZZ_CHECK(total <= r.length);
    std::array<std::uint8_t, block_status_header_size> header{};
    FUZZ_CHECK(encode_block_status_header(header, r.cookie, static_cast<std::uint32_t>(n)) == header.size());
    FUZZ_CHECK(load_u16(&header[6]) == chunk_block_status && load_u32(&header[16]) == 4 + n);
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    nbdsched::fuzz::Input in(data, size);
    ExportLimits limits;
    const std::uint8_t shape = in.u8();
    limits.read_only = shape & 1;
    limits.structured = shape & 2;
    // Sizes near the interesting edges: tiny, ordinary, and near 2^64.
    limits.size = (shape & 4) ? ~in.u64() : in.u32();
    limits.max_payload = (shape & 8) ? in.u32() : (32u << 20);
    limits.block_status = shape & 16;

    FUZZ_CHECK(known_error(errno_to_nbd(static_cast<int>(in.u16()))));
    while (in.remaining() >= request_size) {
        auto raw = in.bytes(request_size);
        std::span<const std::uint8_t, request_size> bytes(raw.data(), request_size);
        auto r = decode_request(bytes);
        if (!r) {
            FUZZ_CHECK(load_u32(raw.data()) != request_magic);
            continue;
        }
        auto again = encode_request(*r);
        FUZZ_CHECK(std::equal(again.begin(), again.end(), raw.begin()));
        FUZZ_CHECK(!command_name(r->type).empty());
        const std::uint32_t error = validate_request(*r, limits);
        check_validation(*r, limits, error);
        check_reply(*r, limits, error);
        if (error == 0 && r->type == static_cast<std::uint16_t>(Command::block_status)) check_block_status(*r, in);
        // A backend errno maps onto an error the spec knows.
        const std::uint32_t mapped = errno_to_nbd(static_cast<int>(r->offset & 0xff));
        FUZZ_CHECK(known_error(mapped));
        check_reply(*r, limits, mapped);
    }
    return 0;
}
