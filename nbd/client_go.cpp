#include "nbd/client_go.hpp"

#include "nbd/wire.hpp"

namespace nbdsched::nbd {

std::optional<std::uint16_t> decode_greeting(std::span<const std::uint8_t, greeting_size> bytes) {
    if (load_u64(bytes.data()) != nbd_magic || load_u64(bytes.data() + 8) != ihaveopt) return std::nullopt;
    auto flags = load_u16(bytes.data() + 16);
    if (!(flags & flag_fixed_newstyle)) return std::nullopt;
    return flags;
}

std::vector<std::uint8_t> encode_go(std::uint16_t handshake_flags, std::string_view name) {
    std::vector<std::uint8_t> out;
    Writer w(out);
    w.u32(flag_c_fixed_newstyle | ((handshake_flags & flag_no_zeroes) ? flag_c_no_zeroes : 0));
    const std::uint16_t infos[] = {info_block_size};
    auto go = encode_option(static_cast<std::uint32_t>(Option::go), encode_info_request(name, infos));
    out.insert(out.end(), go.begin(), go.end());
    return out;
}

GoReplies::State GoReplies::fail(std::string why) {
    error_ = std::move(why);
    return State::failed;
}

GoReplies::State GoReplies::feed(const OptionReply& reply) {
    if (reply.option != static_cast<std::uint32_t>(Option::go))
        return fail("reply to option " + std::to_string(reply.option) + " while waiting for NBD_OPT_GO");
    if (reply.type & rep_flag_error) {
        std::string text(reply.data.begin(), reply.data.end());
        return fail(reply_type_name(reply.type) + (text.empty() ? "" : ": " + text));
    }
    if (reply.type == rep_ack) {
        if (!have_export_) return fail("NBD_OPT_GO acknowledged without NBD_INFO_EXPORT");
        return State::done;
    }
    if (reply.type != rep_info) return fail("unexpected reply type " + std::to_string(reply.type));
    Reader r(reply.data);
    std::uint16_t info = 0;
    if (!r.u16(info)) return fail("empty NBD_REP_INFO");
    if (info == info_export) {
        std::uint32_t hi = 0, lo = 0;
        if (reply.data.size() != 12 || !r.u32(hi) || !r.u32(lo) || !r.u16(result_.flags))
            return fail("NBD_INFO_EXPORT of " + std::to_string(reply.data.size()) + " bytes, not 12");
        result_.size = (std::uint64_t(hi) << 32) | lo;
        have_export_ = true;
    } else if (info == info_block_size) {
        if (reply.data.size() != 14 || !r.u32(result_.min_block) || !r.u32(result_.preferred_block) ||
            !r.u32(result_.max_block))
            return fail("NBD_INFO_BLOCK_SIZE of " + std::to_string(reply.data.size()) + " bytes, not 14");
    }
    return State::more;   // NBD_INFO_NAME, _DESCRIPTION and unknown items are skipped
}

std::string reply_type_name(std::uint32_t type) {
    switch (type) {
    case rep_err_unsup: return "NBD_REP_ERR_UNSUP";
    case rep_err_policy: return "NBD_REP_ERR_POLICY";
    case rep_err_invalid: return "NBD_REP_ERR_INVALID";
    case rep_err_platform: return "NBD_REP_ERR_PLATFORM";
    case rep_err_tls_reqd: return "NBD_REP_ERR_TLS_REQD";
    case rep_err_unknown: return "NBD_REP_ERR_UNKNOWN";
    case rep_err_shutdown: return "NBD_REP_ERR_SHUTDOWN";
    case rep_err_block_size_reqd: return "NBD_REP_ERR_BLOCK_SIZE_REQD";
    case rep_err_too_big: return "NBD_REP_ERR_TOO_BIG";
    default: return "reply type " + std::to_string(type);
    }
}

}   // namespace nbdsched::nbd
