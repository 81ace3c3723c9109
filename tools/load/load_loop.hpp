// One connection's load: keeps `depth` requests of `block` bytes in flight
// for a while, sending every free slot's request in one sendmsg and reading
// whatever replies have arrived in one read. A client that costs little per
// request, so that the server is what limits the rate where fio's single
// thread would be (bench/exp15_light_client.py).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace nbdsched::load {

struct LoadSpec {
    bool write = false;
    bool random = true;           // else sequential, wrapping at the export's end
    std::uint32_t block = 4096;   // a multiple of 512
    unsigned depth = 64;
    std::chrono::nanoseconds duration = std::chrono::seconds(3);
    std::uint64_t export_size = 0;
    std::uint64_t seed = 1;
    // A server that takes no bytes or sends none for this long fails the
    // load instead of hanging it.
    std::chrono::milliseconds stall_timeout = std::chrono::seconds(30);
};

struct LoadTotals {
    std::uint64_t requests = 0;   // answered
    std::uint64_t bytes = 0;      // of the answered requests
    std::uint64_t errors = 0;     // replies with an NBD error
    double seconds = 0;           // first request sent to last reply read
    std::string failure;          // the connection broke ("" when it did not)
};

// What a write puts in each 512-byte sector: its byte offset in the export
// (little-endian) in the first 8 bytes, then `sector_fill`, so that a reader
// can check where every sector of a write landed.
inline constexpr std::uint8_t sector_fill = 0x5a;

// Runs the load on `socket` (connected, in transmission, blocking), then
// sends NBD_CMD_DISC. Writes carry the sector stamps above.
LoadTotals run_load(int socket, const LoadSpec& spec);

}   // namespace nbdsched::load
