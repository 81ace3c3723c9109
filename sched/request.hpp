// What a scheduler sees of an I/O request. Pure data: no buffers, no sockets.
#pragma once

#include <cstdint>
#include <string_view>

#include "common/units.hpp"

namespace nbdsched::sched {

// Time is nanoseconds since an arbitrary epoch chosen by the driver: the
// daemon uses steady_clock, the simulator a virtual clock starting at 0.
using Time = Nanos;

using RequestId = std::uint64_t;   // unique per device while the request lives
using QueueId = std::uint64_t;     // a client connection (CFQ's per-process queue)
using GroupId = std::uint32_t;     // a tenant (CFQ/BFQ's cgroup)

enum class Op : std::uint8_t { read,
                               write,
                               flush,
                               trim,
                               write_zeroes };

std::string_view to_string(Op op);

struct Request {
    RequestId id = 0;
    QueueId queue = 0;
    GroupId group = 0;   // the group of `queue`, repeated for convenience
    Op op = Op::read;
    std::uint64_t offset = 0;   // bytes, device-relative
    std::uint64_t length = 0;   // bytes (0 for flush)
    bool sync = true;           // reads, flushes and FUA writes are sync
    bool fua = false;
    Time arrival{};

    std::uint64_t sectors() const { return length / 512; }
};

}   // namespace nbdsched::sched
