// What a live connection carries from one daemon process to the next in a
// planned restart (docs/restart.md): the negotiated state of its
// transmission phase and the bytes already read from its socket but not
// parsed yet. The socket itself travels beside it as a file descriptor; the
// JSON names it by its index in the list of passed descriptors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "daemon/tenancy/classify.hpp"
#include "daemon/tenancy/live_changes.hpp"
#include "nbd/negotiation.hpp"

namespace nbdsched::daemon {

struct ConnectionState {
    std::uint64_t id = 0;
    std::string peer;                // for logs: "unix pid 12 uid 0"
    PeerInfo identity;               // taken at the first accept (rules, access)
    std::string export_name;         // the new process binds the same export by name
    std::uint64_t export_size = 0;   // what the client was told; a different size is refused
    std::uint16_t transmission_flags = 0;
    bool structured = false;            // structured replies negotiated
    bool block_status = false;          // base:allocation selected
    std::string group;                  // the group its queue was in; empty: classify again
    std::vector<std::uint8_t> unread;   // read but not parsed: the start of the next request(s)
    int fd = -1;                        // index into the passed descriptors
};

struct ListenerState {
    int fd = -1;   // index into the passed descriptors
    nbd::TlsMode tls_mode = nbd::TlsMode::off;
};

// Everything one hand-over passes, minus the descriptors.
struct HandoverState {
    // Bumped whenever the meaning of a field changes: a new process refuses
    // a state of another version rather than guess.
    static constexpr int current_version = 1;
    int version = current_version;
    std::vector<ListenerState> listeners;
    std::vector<ConnectionState> connections;
    LiveChanges live_changes;   // optional in the JSON: a state without it carries none
};

std::string to_json(const HandoverState& state);
// nullopt and `error` for malformed JSON, a missing field, another version,
// or a descriptor index outside [0, fd_count).
std::optional<HandoverState> handover_from_json(const std::string& text, std::size_t fd_count, std::string& error);

}   // namespace nbdsched::daemon
