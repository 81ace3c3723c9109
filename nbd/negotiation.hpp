// The option haggling of the fixed newstyle handshake as a pure state
// machine: one decoded option in, the reply bytes and what to do next out.
// No sockets here, so every path (including hostile input) is unit-tested.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "nbd/constants.hpp"
#include "nbd/handshake.hpp"

namespace nbdsched::nbd {

// What a client can see of an export.
struct ExportInfo {
    std::string name;
    std::string description;
    std::uint64_t size = 0;
    std::uint16_t flags = tflag_has_flags;   // transmission flags, SEND_DF added on negotiation
    std::uint32_t min_block = 1;
    std::uint32_t preferred_block = 4096;
    std::uint32_t max_block = 32u << 20;
};

// An empty name selects the default export: the one named "default", else
// the first. nullptr when there is no such export.
const ExportInfo* find_export(std::span<const ExportInfo> exports, std::string_view name);

// Hostile-client limits: an option longer than this or more options than
// this in one handshake (the default of Negotiation::max_options) closes
// the connection.
inline constexpr std::uint32_t max_option_length = 64u << 10;
inline constexpr unsigned max_options = 1024;

// nbdkit's --tls: off refuses STARTTLS; on offers it; require answers every
// option but STARTTLS and ABORT with NBD_REP_ERR_TLS_REQD until TLS is up.
enum class TlsMode { off,
                     on,
                     require };

struct Negotiation {
    ClientFlags client;
    bool structured_replies = false;
    unsigned options = 0;
    // NBD_OPT_SET_META_CONTEXT selected base:allocation, for this export.
    bool base_allocation = false;
    std::string meta_export;
    unsigned max_options = nbd::max_options;
    TlsMode tls = TlsMode::off;
    bool tls_active = false;   // the caller sets it once its TLS handshake succeeded
    // The caller sets it when the server begins to stop: every option but
    // ABORT is answered NBD_REP_ERR_SHUTDOWN ("the server is unwilling to
    // continue negotiation as it is in the process of being shut down", NBD
    // spec), then the connection closes. EXPORT_NAME, which has no error
    // reply, closes at once.
    bool shutting_down = false;
    // Whether this client may open an export (its access rules); unset:
    // every export. LIST leaves out the others, INFO/GO/meta contexts
    // answer NBD_REP_ERR_POLICY, EXPORT_NAME closes.
    std::function<bool(const ExportInfo&)> may_open;

    bool allows(const ExportInfo& e) const { return !may_open || may_open(e); }
};

enum class Next { more_options,
                  close,
                  transmission,
                  starttls };   // write the reply, then the TLS handshake, then more options

struct OptionResult {
    Next next = Next::more_options;
    const ExportInfo* chosen = nullptr;     // set when next == transmission
    std::uint16_t transmission_flags = 0;   // what the client was told
    bool block_status = false;              // base:allocation holds for `chosen`
    std::string reason;                     // why we close, for the log
    bool graceful = false;                  // an orderly end: the client asked (ABORT), or the server stops
    bool tls_refused = false;               // answered NBD_REP_ERR_TLS_REQD
    const ExportInfo* refused = nullptr;    // asked for an export that may_open refused
};

// Handles one option whose payload has been read completely. Replies are
// appended to `out`; the caller writes them before acting on `next`.
OptionResult handle_option(Negotiation& state, const OptionHeader& header,
                           std::span<const std::uint8_t> data, std::span<const ExportInfo> exports,
                           std::vector<std::uint8_t>& out);

// The flags a client is told for an export in its negotiated state.
std::uint16_t transmission_flags(const Negotiation& state, const ExportInfo& e);

std::string_view option_name(std::uint32_t option);

}   // namespace nbdsched::nbd
