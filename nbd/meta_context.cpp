#include "nbd/meta_context.hpp"

#include <string>

#include "common/utf8.hpp"
#include "nbd/handshake.hpp"
#include "nbd/wire.hpp"

namespace nbdsched::nbd {

namespace {

// "base:" lists every context of the namespace; SET needs the full name.
bool matches(std::string_view query, bool listing) {
    if (query == base_allocation) return true;
    return listing && query == "base:";
}

// LIST's replies carry id 0: the spec reserves it there ("clients MUST
// disregard it"); SET's carry the id BLOCK_STATUS chunks will name.
void append_meta_context(std::vector<std::uint8_t>& out, std::uint32_t option, bool listing) {
    append_reply_header(out, option, rep_meta_context, static_cast<std::uint32_t>(4 + base_allocation.size()));
    Writer w(out);
    w.u32(listing ? 0 : base_allocation_id);
    w.bytes(base_allocation);
}

}   // namespace

std::optional<MetaContextRequest> decode_meta_context_request(std::span<const std::uint8_t> data) {
    Reader r(data);
    MetaContextRequest req;
    std::uint32_t name_length = 0, count = 0;
    if (!r.u32(name_length) || name_length > max_string || !r.string(name_length, req.export_name)) return {};
    if (!r.u32(count)) return {};
    // Each query takes at least its 4-byte length: a count the payload
    // cannot hold is refused before anything is reserved for it.
    if (count > r.remaining() / 4) return {};
    req.queries.reserve(count);
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint32_t length = 0;
        std::string_view query;
        if (!r.u32(length) || length > max_string || !r.string(length, query)) return {};
        req.queries.push_back(query);
    }
    if (r.remaining() != 0) return {};
    return req;
}

std::vector<std::uint8_t> encode_meta_context_request(std::string_view export_name,
                                                      std::span<const std::string_view> queries) {
    std::vector<std::uint8_t> out;
    Writer w(out);
    w.u32(static_cast<std::uint32_t>(export_name.size()));
    w.bytes(export_name);
    w.u32(static_cast<std::uint32_t>(queries.size()));
    for (auto q : queries) {
        w.u32(static_cast<std::uint32_t>(q.size()));
        w.bytes(q);
    }
    return out;
}

OptionResult handle_meta_context(Negotiation& state, std::uint32_t option, std::span<const std::uint8_t> data,
                                 std::span<const ExportInfo> exports, std::vector<std::uint8_t>& out) {
    const bool listing = option == static_cast<std::uint32_t>(Option::list_meta_context);
    // SET replaces every earlier selection "including when this command
    // fails": clear it before any error reply.
    if (!listing) {
        state.base_allocation = false;
        state.meta_export.clear();
    }
    if (!state.structured_replies) {
        append_error(out, option, rep_err_invalid, "metadata contexts need NBD_OPT_STRUCTURED_REPLY first");
        return {};
    }
    auto request = decode_meta_context_request(data);
    if (!request) {
        append_error(out, option, rep_err_invalid, "malformed metadata context request");
        return {};
    }
    const ExportInfo* e = find_export(exports, request->export_name);
    if (!e) {
        append_error(out, option, rep_err_unknown, "unknown export '" + printable(request->export_name) + "'");
        return {};
    }
    if (!state.allows(*e)) {
        append_error(out, option, rep_err_policy, "access to export '" + e->name + "' denied by policy");
        return {};
    }
    bool selected = listing && request->queries.empty();   // LIST without queries: everything
    for (auto q : request->queries) selected = selected || matches(q, listing);
    if (!listing && selected) {
        state.base_allocation = true;
        state.meta_export = e->name;
    }
    if (selected) append_meta_context(out, option, listing);
    append_ack(out, option);
    return {};
}

bool block_status_negotiated(const Negotiation& state, const ExportInfo& chosen) {
    return state.base_allocation && state.meta_export == chosen.name;
}

}   // namespace nbdsched::nbd
