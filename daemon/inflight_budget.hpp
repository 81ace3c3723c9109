// A device's in-flight limits (limits.max_inflight_per_device and
// max_inflight_bytes_per_device): requests read from any connection of the
// device but not yet answered, and their data bytes. Connections charge it
// as they read a request and give it back as the reply leaves. A connection
// that finds it full stops reading its socket and waits here; it is woken
// when room appears. Event loop thread only.
//
// Like the per-connection limits, fullness is checked before a request is
// read, so one request may take the bytes over the limit: a request larger
// than the whole byte budget still passes when the device is otherwise idle.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

namespace nbdsched::daemon {

class InflightBudget {
public:
    class Waiter {
    public:
        // Room appeared; the waiter is no longer registered (called on the
        // event loop thread, from inside give(): defer real work).
        virtual void budget_available() = 0;

    protected:
        ~Waiter() = default;
    };

    struct Stats {
        std::uint64_t requests = 0;
        std::uint64_t bytes = 0;
        std::uint64_t peak_requests = 0;   // high-water marks since start
        std::uint64_t peak_bytes = 0;
        std::uint64_t waits = 0;           // times a connection paused on this budget
    };

    InflightBudget(std::uint64_t max_requests, std::uint64_t max_bytes);

    bool full() const { return requests_ >= max_requests_ || bytes_ >= max_bytes_; }
    void take_request();
    void take_bytes(std::uint64_t n);
    // Gives back one request and its bytes; wakes every waiter once there is room.
    void give(std::uint64_t bytes);
    // Registers a waiter for the next time there is room (a dead one is skipped).
    void wait(std::weak_ptr<Waiter> waiter);

    Stats stats() const;

private:
    std::uint64_t max_requests_;
    std::uint64_t max_bytes_;
    std::uint64_t requests_ = 0;
    std::uint64_t bytes_ = 0;
    std::uint64_t peak_requests_ = 0;
    std::uint64_t peak_bytes_ = 0;
    std::uint64_t waits_ = 0;
    std::vector<std::weak_ptr<Waiter>> waiters_;
};

} // namespace nbdsched::daemon
