#include "nbd/negotiation.hpp"

#include <algorithm>

#include "common/utf8.hpp"
#include "nbd/meta_context.hpp"

namespace nbdsched::nbd {

namespace {

OptionResult close_with(std::string reason) {
    OptionResult r;
    r.next = Next::close;
    r.reason = std::move(reason);
    return r;
}

// The spec's answer to "not for you": the client may try another option.
OptionResult refuse(std::uint32_t option, const ExportInfo& e, std::vector<std::uint8_t>& out) {
    append_error(out, option, rep_err_policy, "access to export '" + e.name + "' denied by policy");
    OptionResult r;
    r.refused = &e;
    return r;
}

// NBD_OPT_INFO and NBD_OPT_GO share everything but the final step.
OptionResult info_or_go(Negotiation& state, std::uint32_t option, std::span<const std::uint8_t> data,
                        std::span<const ExportInfo> exports, std::vector<std::uint8_t>& out) {
    auto request = decode_info_request(data);
    if (!request) {
        append_error(out, option, rep_err_invalid, "malformed NBD_OPT_INFO/NBD_OPT_GO payload");
        return {};
    }
    const ExportInfo* e = find_export(exports, request->name);
    if (!e) {
        // The client's bytes: the message is UTF-8 (NBD spec) and goes to the log.
        append_error(out, option, rep_err_unknown, "unknown export '" + printable(request->name) + "'");
        return {};
    }
    if (!state.allows(*e)) return refuse(option, *e, out);
    auto flags = transmission_flags(state, *e);
    append_info_export(out, option, e->size, flags);
    bool want_name = std::find(request->infos.begin(), request->infos.end(), info_name) != request->infos.end();
    bool want_desc =
        std::find(request->infos.begin(), request->infos.end(), info_description) != request->infos.end();
    if (want_name) append_info_string(out, option, info_name, e->name);
    if (want_desc && !e->description.empty()) append_info_string(out, option, info_description, e->description);
    // Sent even when not asked: the constraints hold whether or not the
    // client promised to honour them, and nbdinfo shows them.
    append_info_block_size(out, option, e->min_block, e->preferred_block, e->max_block);
    append_ack(out, option);
    OptionResult r;
    if (option == static_cast<std::uint32_t>(Option::go)) {
        r.next = Next::transmission;
        r.chosen = e;
        r.transmission_flags = flags;
        r.block_status = block_status_negotiated(state, *e);
    }
    return r;
}

// NBD_OPT_STARTTLS (the spec's "TLS support" section): ACK, then the
// caller runs the TLS handshake on the same socket.
OptionResult starttls(Negotiation& state, std::uint32_t option, std::span<const std::uint8_t> data,
                      std::vector<std::uint8_t>& out) {
    if (state.tls == TlsMode::off) {
        append_error(out, option, rep_err_policy, "TLS is not enabled on this listener");
        return {};
    }
    if (!data.empty()) {
        append_error(out, option, rep_err_invalid, "NBD_OPT_STARTTLS takes no data");
        return {};
    }
    if (state.tls_active) {
        append_error(out, option, rep_err_invalid, "TLS is already active");
        return {};
    }
    // Nothing agreed in plaintext survives the upgrade (as nbdkit does): a
    // man in the middle could have sent it (the spec names the meta
    // context selection too).
    state.structured_replies = false;
    state.base_allocation = false;
    state.meta_export.clear();
    append_ack(out, option);
    OptionResult r;
    r.next = Next::starttls;
    return r;
}

}   // namespace

const ExportInfo* find_export(std::span<const ExportInfo> exports, std::string_view name) {
    if (name.empty()) {
        for (const auto& e : exports)
            if (e.name == "default") return &e;
        return exports.empty() ? nullptr : &exports.front();
    }
    for (const auto& e : exports)
        if (e.name == name) return &e;
    return nullptr;
}

std::uint16_t transmission_flags(const Negotiation& state, const ExportInfo& e) {
    std::uint16_t flags = e.flags | tflag_has_flags;
    if (state.structured_replies) flags |= tflag_send_df;
    return flags;
}

OptionResult handle_option(Negotiation& state, const OptionHeader& header,
                           std::span<const std::uint8_t> data, std::span<const ExportInfo> exports,
                           std::vector<std::uint8_t>& out) {
    const auto option = header.option;
    if (++state.options > state.max_options) return close_with("too many options");
    const bool tls_missing = state.tls == TlsMode::require && !state.tls_active;
    if (option == static_cast<std::uint32_t>(Option::export_name)) {
        // No error reply exists for EXPORT_NAME: the spec says close.
        if (state.shutting_down) return close_with("NBD_OPT_EXPORT_NAME while the server is shutting down");
        if (tls_missing) return close_with("NBD_OPT_EXPORT_NAME without TLS on a TLS-only listener");
        std::string_view name(reinterpret_cast<const char*>(data.data()), data.size());
        if (name.size() > max_string) return close_with("export name too long");
        const ExportInfo* e = find_export(exports, name);
        if (!e) return close_with("NBD_OPT_EXPORT_NAME: unknown export '" + printable(name) + "'");
        if (!state.allows(*e)) {   // EXPORT_NAME has no error reply: all we can do is close
            auto r = close_with("NBD_OPT_EXPORT_NAME: export '" + e->name + "' denied by policy");
            r.refused = e;
            return r;
        }
        OptionResult r;
        r.next = Next::transmission;
        r.chosen = e;
        r.transmission_flags = transmission_flags(state, *e);
        r.block_status = block_status_negotiated(state, *e);
        append_export_name_reply(out, e->size, r.transmission_flags, state.client.no_zeroes);
        return r;
    }
    // Only fixed newstyle clients may send anything but EXPORT_NAME, and
    // only they understand error replies.
    if (!state.client.fixed_newstyle)
        return close_with("option " + std::string(option_name(option)) + " from a non-fixed-newstyle client");

    if (state.shutting_down && option != static_cast<std::uint32_t>(Option::abort)) {
        append_error(out, option, rep_err_shutdown, "the server is shutting down");
        auto r = close_with("server shutting down: answered " + std::string(option_name(option)) +
                            " with NBD_REP_ERR_SHUTDOWN");
        r.graceful = true;
        return r;
    }

    if (tls_missing && option != static_cast<std::uint32_t>(Option::abort) &&
        option != static_cast<std::uint32_t>(Option::starttls)) {
        append_error(out, option, rep_err_tls_reqd, "TLS is required: send NBD_OPT_STARTTLS first");
        OptionResult r;
        r.tls_refused = true;
        return r;
    }

    switch (static_cast<Option>(option)) {
    case Option::abort: {
        append_ack(out, option);
        auto r = close_with("client sent NBD_OPT_ABORT");
        r.graceful = true;
        return r;
    }
    case Option::list:
        if (!data.empty()) {
            append_error(out, option, rep_err_invalid, "NBD_OPT_LIST takes no data");
            return {};
        }
        for (const auto& e : exports)
            if (state.allows(e)) append_server(out, option, e.name, e.description);
        append_ack(out, option);
        return {};
    case Option::starttls:
        return starttls(state, option, data, out);
    case Option::info:
    case Option::go:
        return info_or_go(state, option, data, exports, out);
    case Option::structured_reply:
        if (!data.empty()) {
            append_error(out, option, rep_err_invalid, "NBD_OPT_STRUCTURED_REPLY takes no data");
            return {};
        }
        state.structured_replies = true;
        append_ack(out, option);
        return {};
    case Option::list_meta_context:
    case Option::set_meta_context:
        return handle_meta_context(state, option, data, exports, out);
    default:
        append_error(out, option, rep_err_unsup, "unsupported option " + std::string(option_name(option)));
        return {};
    }
}

std::string_view option_name(std::uint32_t option) {
    switch (static_cast<Option>(option)) {
    case Option::export_name: return "NBD_OPT_EXPORT_NAME";
    case Option::abort: return "NBD_OPT_ABORT";
    case Option::list: return "NBD_OPT_LIST";
    case Option::peek_export: return "NBD_OPT_PEEK_EXPORT";
    case Option::starttls: return "NBD_OPT_STARTTLS";
    case Option::info: return "NBD_OPT_INFO";
    case Option::go: return "NBD_OPT_GO";
    case Option::structured_reply: return "NBD_OPT_STRUCTURED_REPLY";
    case Option::list_meta_context: return "NBD_OPT_LIST_META_CONTEXT";
    case Option::set_meta_context: return "NBD_OPT_SET_META_CONTEXT";
    case Option::extended_headers: return "NBD_OPT_EXTENDED_HEADERS";
    }
    return "unknown";
}

}   // namespace nbdsched::nbd
