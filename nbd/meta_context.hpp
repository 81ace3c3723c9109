// NBD_OPT_LIST_META_CONTEXT and NBD_OPT_SET_META_CONTEXT: decoding the
// query payload and answering it. The only context served is
// "base:allocation" (holes and zeroes, for NBD_CMD_BLOCK_STATUS).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "nbd/negotiation.hpp"

namespace nbdsched::nbd {

// Payload: u32 export name length, name, u32 query count, then per query a
// u32 length and the query string.
struct MetaContextRequest {
    std::string_view export_name;
    std::vector<std::string_view> queries;
};
// nullopt when a length runs past the payload, bytes are left over, the
// count disagrees with the queries present, or a string is over max_string.
std::optional<MetaContextRequest> decode_meta_context_request(std::span<const std::uint8_t> data);
// Client side encoder (tests and tools).
std::vector<std::uint8_t> encode_meta_context_request(std::string_view export_name,
                                                      std::span<const std::string_view> queries);

// Answers LIST (what matches each query; all contexts for no query) or SET
// (selects the exactly named contexts, replacing an earlier selection).
// Both need structured replies negotiated first (NBD_REP_ERR_INVALID).
OptionResult handle_meta_context(Negotiation& state, std::uint32_t option, std::span<const std::uint8_t> data,
                                 std::span<const ExportInfo> exports, std::vector<std::uint8_t>& out);

// Whether a SET selection holds for the export a GO / EXPORT_NAME chose: the
// spec ties the selection to the export it was made for.
bool block_status_negotiated(const Negotiation& state, const ExportInfo& chosen);

}   // namespace nbdsched::nbd
