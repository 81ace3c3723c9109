// Client sockets for tests: connect to a unix socket or a loopback port.
#pragma once

#include <cstdint>
#include <string>

namespace nbdsched::testlib {

// A connected descriptor, or -1 when refused.
int connect_unix(const std::string& path);
int connect_tcp(std::uint16_t port);
// A loopback port free right now (someone may take it before it is used).
std::uint16_t free_tcp_port();

}   // namespace nbdsched::testlib
