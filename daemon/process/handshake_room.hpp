// limits.max_handshakes: which connection still in the handshake closes to
// make room for a new one. A connection that has not finished its handshake
// has proved nothing (allow: rules refuse only at option time), so idle ones
// are cheap for anyone who reaches a socket; closing the oldest of the peer
// that holds the most keeps a flood from one peer from locking out others.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "daemon/tenancy/classify.hpp"

namespace nbdsched::daemon {

// Whose handshakes count together: the uid on a unix socket (any process of
// a user is the same peer), the address on TCP.
std::string handshake_peer(const PeerInfo& peer);

// `handshakes`: (connection id, peer) of each connection in the handshake,
// ids growing with age (the oldest has the smallest). `newcomer`: the peer
// of the connection that wants room, counted with its peer. The connection
// to close: the oldest of the peer holding the most; on a tie, of the peer
// whose oldest is oldest. nullopt when `handshakes` is empty.
std::optional<std::uint64_t> handshake_to_close(const std::vector<std::pair<std::uint64_t, std::string>>& handshakes,
                                                const std::string& newcomer);

}   // namespace nbdsched::daemon
