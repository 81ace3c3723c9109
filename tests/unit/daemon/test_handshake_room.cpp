// limits.max_handshakes: which handshake closes for a new connection.
#include <doctest/doctest.h>

#include "daemon/process/handshake_room.hpp"

using namespace nbdsched::daemon;

TEST_CASE("handshake_peer: the uid on a unix socket, the address on TCP") {
    PeerInfo unix_peer;
    unix_peer.is_unix = true;
    unix_peer.pid = 12;
    unix_peer.uid = 1000;
    CHECK(handshake_peer(unix_peer) == "uid 1000");
    unix_peer.pid = 13;   // another process of the same user: the same peer
    CHECK(handshake_peer(unix_peer) == "uid 1000");
    unix_peer.uid.reset();
    CHECK(handshake_peer(unix_peer) == "unix");
    PeerInfo tcp;
    tcp.address = "192.0.2.7";
    CHECK(handshake_peer(tcp) == "tcp 192.0.2.7");
}

TEST_CASE("handshake_to_close: the oldest handshake of the peer holding the most") {
    CHECK_FALSE(handshake_to_close({}, "uid 1"));
    // A peer holding many idle handshakes loses its oldest, even to itself.
    std::vector<std::pair<std::uint64_t, std::string>> h{{3, "uid 1"}, {4, "tcp a"}, {5, "tcp a"}, {7, "tcp a"}};
    CHECK(handshake_to_close(h, "uid 1") == 4u);
    CHECK(handshake_to_close(h, "tcp a") == 4u);
    // The newcomer counts with its peer: uid 1 then holds as many as tcp a.
    h = {{3, "uid 1"}, {4, "uid 1"}, {5, "tcp a"}, {6, "tcp a"}, {8, "tcp a"}};
    CHECK(handshake_to_close(h, "uid 1") == 3u);   // a tie: the peer whose oldest is oldest
    CHECK(handshake_to_close(h, "tcp b") == 5u);
    // Every peer holds one: the oldest overall, never the newcomer's nothing.
    h = {{9, "tcp c"}, {2, "tcp d"}, {5, "tcp e"}};
    CHECK(handshake_to_close(h, "tcp f") == 2u);
}
