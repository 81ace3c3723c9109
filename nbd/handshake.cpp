#include "nbd/handshake.hpp"

#include "nbd/wire.hpp"

namespace nbdsched::nbd {

std::array<std::uint8_t, greeting_size> encode_greeting(std::uint16_t handshake_flags) {
    std::array<std::uint8_t, greeting_size> out{};
    store_u64(out.data(), nbd_magic);
    store_u64(out.data() + 8, ihaveopt);
    store_u16(out.data() + 16, handshake_flags);
    return out;
}

std::optional<ClientFlags> decode_client_flags(std::span<const std::uint8_t, 4> bytes,
                                               std::uint16_t offered_handshake_flags) {
    std::uint32_t flags = load_u32(bytes.data());
    std::uint32_t allowed = 0;
    if (offered_handshake_flags & flag_fixed_newstyle) allowed |= flag_c_fixed_newstyle;
    if (offered_handshake_flags & flag_no_zeroes) allowed |= flag_c_no_zeroes;
    if (flags & ~allowed) return std::nullopt;
    return ClientFlags{(flags & flag_c_fixed_newstyle) != 0, (flags & flag_c_no_zeroes) != 0};
}

std::optional<OptionHeader> decode_option_header(std::span<const std::uint8_t, option_header_size> bytes) {
    if (load_u64(bytes.data()) != ihaveopt) return std::nullopt;
    return OptionHeader{load_u32(bytes.data() + 8), load_u32(bytes.data() + 12)};
}

std::vector<std::uint8_t> encode_option(std::uint32_t option, std::span<const std::uint8_t> data) {
    std::vector<std::uint8_t> out;
    Writer w(out);
    w.u64(ihaveopt);
    w.u32(option);
    w.u32(static_cast<std::uint32_t>(data.size()));
    out.insert(out.end(), data.begin(), data.end());
    return out;
}

std::vector<std::uint8_t> encode_info_request(std::string_view name, std::span<const std::uint16_t> infos) {
    std::vector<std::uint8_t> out;
    Writer w(out);
    w.u32(static_cast<std::uint32_t>(name.size()));
    w.bytes(name);
    w.u16(static_cast<std::uint16_t>(infos.size()));
    for (auto i : infos) w.u16(i);
    return out;
}

std::optional<InfoRequest> decode_info_request(std::span<const std::uint8_t> data) {
    Reader r(data);
    std::uint32_t name_length = 0;
    InfoRequest req;
    if (!r.u32(name_length) || name_length > r.remaining() || !r.string(name_length, req.name))
        return std::nullopt;
    std::uint16_t count = 0;
    if (!r.u16(count) || r.remaining() != std::size_t(count) * 2) return std::nullopt;
    req.infos.resize(count);
    for (auto& info : req.infos) r.u16(info);
    return req;
}

void append_reply_header(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint32_t type,
                         std::uint32_t length) {
    Writer w(out);
    w.u64(option_reply_magic);
    w.u32(option);
    w.u32(type);
    w.u32(length);
}

void append_ack(std::vector<std::uint8_t>& out, std::uint32_t option) {
    append_reply_header(out, option, rep_ack, 0);
}

void append_error(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint32_t type,
                  std::string_view message) {
    if (message.size() > max_string) message = message.substr(0, max_string);
    append_reply_header(out, option, type, static_cast<std::uint32_t>(message.size()));
    Writer(out).bytes(message);
}

void append_server(std::vector<std::uint8_t>& out, std::uint32_t option, std::string_view name,
                   std::string_view description) {
    append_reply_header(out, option, rep_server,
                        static_cast<std::uint32_t>(4 + name.size() + description.size()));
    Writer w(out);
    w.u32(static_cast<std::uint32_t>(name.size()));
    w.bytes(name);
    w.bytes(description);
}

void append_info_export(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint64_t size,
                        std::uint16_t transmission_flags) {
    append_reply_header(out, option, rep_info, 12);
    Writer w(out);
    w.u16(info_export);
    w.u64(size);
    w.u16(transmission_flags);
}

void append_info_string(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint16_t info,
                        std::string_view text) {
    append_reply_header(out, option, rep_info, static_cast<std::uint32_t>(2 + text.size()));
    Writer w(out);
    w.u16(info);
    w.bytes(text);
}

void append_info_block_size(std::vector<std::uint8_t>& out, std::uint32_t option, std::uint32_t minimum,
                            std::uint32_t preferred, std::uint32_t maximum) {
    append_reply_header(out, option, rep_info, 14);
    Writer w(out);
    w.u16(info_block_size);
    w.u32(minimum);
    w.u32(preferred);
    w.u32(maximum);
}

void append_export_name_reply(std::vector<std::uint8_t>& out, std::uint64_t size,
                              std::uint16_t transmission_flags, bool no_zeroes) {
    Writer w(out);
    w.u64(size);
    w.u16(transmission_flags);
    if (!no_zeroes) w.zeroes(export_name_zeroes);
}

std::optional<std::size_t> decode_option_reply(std::span<const std::uint8_t> in, OptionReply& reply) {
    if (in.size() < option_reply_header_size) return 0;
    if (load_u64(in.data()) != option_reply_magic) return std::nullopt;
    std::uint32_t length = load_u32(in.data() + 16);
    if (in.size() - option_reply_header_size < length) return 0;
    reply.option = load_u32(in.data() + 8);
    reply.type = load_u32(in.data() + 12);
    auto data = in.subspan(option_reply_header_size, length);
    reply.data.assign(data.begin(), data.end());
    return option_reply_header_size + length;
}

}   // namespace nbdsched::nbd
