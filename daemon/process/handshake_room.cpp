#include "daemon/process/handshake_room.hpp"

#include <map>

namespace nbdsched::daemon {

std::string handshake_peer(const PeerInfo& peer) {
    if (!peer.is_unix) return "tcp " + peer.address;
    return peer.uid ? "uid " + std::to_string(*peer.uid) : "unix";
}

std::optional<std::uint64_t> handshake_to_close(const std::vector<std::pair<std::uint64_t, std::string>>& handshakes,
                                                const std::string& newcomer) {
    struct Held {
        std::size_t count = 0;
        std::optional<std::uint64_t> oldest;
    };
    std::map<std::string, Held> by_peer;
    for (const auto& [id, peer] : handshakes) {
        auto& h = by_peer[peer];
        ++h.count;
        if (!h.oldest || id < *h.oldest) h.oldest = id;
    }
    ++by_peer[newcomer].count;
    const Held* pick = nullptr;
    for (const auto& [peer, h] : by_peer) {
        if (!h.oldest) continue;   // the newcomer's peer with nothing else in the handshake
        if (!pick || h.count > pick->count || (h.count == pick->count && *h.oldest < *pick->oldest)) pick = &h;
    }
    if (!pick) return std::nullopt;
    return pick->oldest;
}

}   // namespace nbdsched::daemon
