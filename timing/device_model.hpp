// Timing models of storage devices: pure functions of the requests they are
// given and of the time they are given them. No I/O, no clock of their own,
// so the simulator drives them in virtual time and the daemon in steady_clock
// time (one implementation, two clocks).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "sched/request.hpp"

namespace nbdsched::timing {

using sched::Op;
using sched::Time;

struct Io {
    Op op = Op::read;
    std::uint64_t offset = 0;   // bytes
    std::uint64_t length = 0;   // bytes
};

class DeviceModel {
public:
    virtual ~DeviceModel() = default;
    virtual std::string_view name() const = 0;   // "hdd", "ssd", "nvme"
    virtual bool rotational() const = 0;
    virtual unsigned queue_depth() const = 0;             // requests accepted at once
    virtual std::uint32_t max_io_bytes() const = 0;       // max_sectors * 512
    virtual std::uint32_t optimal_io_bytes() const = 0;   // 0 = none reported

    // The device accepts `io` at `now` (the caller keeps at most queue_depth()
    // outstanding) and returns when it completes. Calls come in non-decreasing
    // `now`; requests are served in the order given (no reordering inside).
    virtual Time submit(const Io& io, Time now) = 0;
};

}   // namespace nbdsched::timing
