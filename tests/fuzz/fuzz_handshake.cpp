// Fuzz target: the fixed newstyle handshake as a hostile client drives it.
// The input is the raw byte stream a client sends after the greeting (client
// flags, then option headers and payloads), processed exactly as
// daemon/session/connection_handshake.cpp does. Every reply the server produces must
// decode, name the option it answers, and end with exactly one final reply.
#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "nbd/handshake.hpp"
#include "nbd/meta_context.hpp"
#include "nbd/negotiation.hpp"
#include "nbd/wire.hpp"
#include "tests/fuzz/check.hpp"

namespace {

using namespace nbdsched::nbd;

constexpr std::uint16_t offered = flag_fixed_newstyle | flag_no_zeroes;

const std::vector<ExportInfo>& exports() {
    static const std::vector<ExportInfo> list = [] {
        std::vector<ExportInfo> v(3);
        v[0].name = "default";
        v[0].description = "RAM disk";
        v[0].size = 64ull << 20;
        v[0].flags |= tflag_send_flush | tflag_send_fua | tflag_send_trim;
        v[1].name = "ro";
        v[1].size = 1 << 20;
        v[1].flags |= tflag_read_only;
        v[2].name = std::string(max_string, 'n');   // the longest name allowed
        v[2].description = std::string(max_string, 'd');
        v[2].size = ~0ull;
        return v;
    }();
    return list;
}

bool is_final(std::uint32_t type) { return type == rep_ack || (type & rep_flag_error); }

// The replies of one option other than EXPORT_NAME.
void check_option_replies(const std::vector<std::uint8_t>& out, const OptionHeader& h, const OptionResult& r,
                          const Negotiation& state) {
    std::span<const std::uint8_t> rest(out);
    std::vector<OptionReply> replies;
    while (!rest.empty()) {
        OptionReply reply;
        auto used = decode_option_reply(rest, reply);
        FUZZ_CHECK(used.has_value() && *used > 0);   // well-formed and complete
        FUZZ_CHECK(reply.option == h.option);
        FUZZ_CHECK(reply.data.size() <= 2 * max_string + 4);
        if (reply.type & rep_flag_error) FUZZ_CHECK(reply.data.size() <= max_string);
        if (reply.type == rep_meta_context) {   // only base:allocation, only for LIST/SET
            FUZZ_CHECK(h.option == static_cast<std::uint32_t>(Option::list_meta_context) ||
                       h.option == static_cast<std::uint32_t>(Option::set_meta_context));
            FUZZ_CHECK(reply.data.size() == 4 + base_allocation.size());
            const bool listing = h.option == static_cast<std::uint32_t>(Option::list_meta_context);
            FUZZ_CHECK(load_u32(reply.data.data()) == (listing ? 0 : base_allocation_id));   // LIST: reserved 0
        }
        if (reply.type == rep_info) {
            FUZZ_CHECK(reply.data.size() >= 2);
            if (load_u16(reply.data.data()) == info_export) {
                FUZZ_CHECK(reply.data.size() == 12);
                FUZZ_CHECK(load_u16(reply.data.data() + 10) & tflag_has_flags);
            }
        }
        replies.push_back(std::move(reply));
        rest = rest.subspan(*used);
    }
    // Silent closes: option limit reached, or a non-fixed-newstyle client.
    if (replies.empty()) {
        FUZZ_CHECK(r.next == Next::close);
        FUZZ_CHECK(state.options > state.max_options || !state.client.fixed_newstyle);
        return;
    }
    // Exactly one final reply (ACK or error), and it is the last one.
    for (std::size_t i = 0; i + 1 < replies.size(); ++i) FUZZ_CHECK(!is_final(replies[i].type));
    FUZZ_CHECK(is_final(replies.back().type));
    if (r.next == Next::transmission) {
        FUZZ_CHECK(h.option == static_cast<std::uint32_t>(Option::go));
        FUZZ_CHECK(replies.back().type == rep_ack);
        FUZZ_CHECK(r.chosen != nullptr);
        FUZZ_CHECK(r.transmission_flags == transmission_flags(state, *r.chosen));
        bool told_size = false;
        for (const auto& rep : replies)
            if (rep.type == rep_info && load_u16(rep.data.data()) == info_export) {
                told_size = load_u64(rep.data.data() + 2) == r.chosen->size &&
                            load_u16(rep.data.data() + 10) == r.transmission_flags;
            }
        FUZZ_CHECK(told_size);
    }
    if (r.next == Next::close) FUZZ_CHECK(r.graceful && replies.back().type == rep_ack);
    // Before TLS on a TLS-only listener nothing about an export leaves.
    if (state.tls == TlsMode::require && !state.tls_active) {
        FUZZ_CHECK(r.next != Next::transmission);
        for (const auto& rep : replies) FUZZ_CHECK(rep.type != rep_server && rep.type != rep_info);
        FUZZ_CHECK(r.tls_refused == (replies.back().type == rep_err_tls_reqd));
    }
    if (r.next == Next::starttls) {
        FUZZ_CHECK(h.option == static_cast<std::uint32_t>(Option::starttls));
        FUZZ_CHECK(replies.size() == 1 && replies.back().type == rep_ack);
        FUZZ_CHECK(state.tls != TlsMode::off && !state.tls_active && !state.structured_replies);
    }
}

void check_export_name(const std::vector<std::uint8_t>& out, const OptionResult& r, const Negotiation& state) {
    if (r.next == Next::close) {
        FUZZ_CHECK(out.empty());
        return;
    }
    FUZZ_CHECK(r.next == Next::transmission && r.chosen != nullptr);
    FUZZ_CHECK(out.size() == export_name_reply_size + (state.client.no_zeroes ? 0 : export_name_zeroes));
    FUZZ_CHECK(load_u64(out.data()) == r.chosen->size);
    FUZZ_CHECK(load_u16(out.data() + 8) == r.transmission_flags);
}

// Payload decoding on its own: what decodes re-encodes to the same bytes.
void check_info_request(std::span<const std::uint8_t> data) {
    auto req = decode_info_request(data);
    if (!req) return;
    auto again = encode_info_request(req->name, req->infos);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), data.begin(), data.end()));
}

void check_meta_context_request(std::span<const std::uint8_t> data) {
    auto req = decode_meta_context_request(data);
    if (!req) return;
    auto again = encode_meta_context_request(req->export_name, req->queries);
    FUZZ_CHECK(std::equal(again.begin(), again.end(), data.begin(), data.end()));
}

// One client's bytes against a listener in `mode`. A STARTTLS that is
// accepted counts as a successful TLS handshake: the rest of the input is
// what the client sends over TLS.
void run(std::span<const std::uint8_t> in, TlsMode mode) {
    if (in.size() < 4) return;
    auto flags = decode_client_flags(in.first<4>(), offered);
    if (!flags) return;   // the daemon closes the connection
    in = in.subspan(4);
    Negotiation state;
    state.client = *flags;
    state.tls = mode;
    const auto& list = exports();
    while (in.size() >= option_header_size) {
        auto header = decode_option_header(in.first<option_header_size>());
        if (!header) return;
        in = in.subspan(option_header_size);
        if (header->length > max_option_length) return;
        // A payload cut short is a client that stopped sending: the daemon
        // waits for it; here the stream ends.
        if (header->length > in.size()) return;
        auto payload = in.first(header->length);
        in = in.subspan(header->length);
        check_info_request(payload);
        check_meta_context_request(payload);

        std::vector<std::uint8_t> out;
        const bool structured_before = state.structured_replies;
        const bool tls_before = state.tls_active;
        auto result = handle_option(state, *header, payload, list, out);
        // Never turned off, but by an accepted STARTTLS.
        FUZZ_CHECK(state.structured_replies || !structured_before || result.next == Next::starttls);
        FUZZ_CHECK(state.tls_active == tls_before);   // only the caller's handshake sets it
        if (result.chosen) FUZZ_CHECK(result.chosen >= list.data() && result.chosen < list.data() + list.size());
        if (result.next == Next::close) FUZZ_CHECK(!result.reason.empty());
        // A selection needs structured replies and names the export it is for.
        if (state.base_allocation) FUZZ_CHECK(state.structured_replies && find_export(list, state.meta_export));
        if (result.block_status) FUZZ_CHECK(result.chosen && result.chosen->name == state.meta_export);
        if (header->option == static_cast<std::uint32_t>(Option::export_name))
            check_export_name(out, result, state);
        else
            check_option_replies(out, *header, result, state);
        if (result.next == Next::starttls) {
            state.tls_active = true;
            continue;
        }
        if (result.next != Next::more_options) return;
        FUZZ_CHECK(state.options <= state.max_options);
    }
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    std::span<const std::uint8_t> in(data, size);
    for (auto mode : {TlsMode::off, TlsMode::on, TlsMode::require}) run(in, mode);
    return 0;
}
