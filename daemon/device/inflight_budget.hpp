// A device's in-flight limits (limits.max_inflight_per_device and
// max_inflight_bytes_per_device): requests read from any connection of the
// device but not yet answered, and their data bytes. Connections charge it
// as they read a request and give it back as the reply leaves. Event loop
// thread only.
//
// Admission is first come, first served, like the kernel's request pool
// (nr_requests): a connection holding a complete request that finds no room
// waits in line here, and room that appears goes to the head of the line as
// a ticket (one request) that nobody else can take. Without that, whichever
// connection happened to read first would take every freed slot, and the
// scheduler would never see the others' requests.
//
// Like the per-connection limits, fullness is checked before a request is
// taken, so one request may take the bytes over the limit: a request larger
// than the whole byte budget still passes when the device is otherwise idle.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>

namespace nbdsched::daemon {

class InflightBudget {
public:
    class Waiter {
    public:
        // The waiter reached the head of the line and now holds a ticket for
        // one request: it must pass it to take_request() or give it back
        // with return_ticket(). Called from inside give()/wait(): defer real work.
        virtual void budget_available() = 0;

    protected:
        ~Waiter() = default;
    };

    struct Stats {
        std::uint64_t requests = 0;
        std::uint64_t bytes = 0;
        std::uint64_t peak_requests = 0;   // high-water marks since start
        std::uint64_t peak_bytes = 0;
        std::uint64_t waits = 0;     // times a connection paused on this budget
        std::uint64_t tickets = 0;   // room promised to woken waiters, not yet taken
    };

    InflightBudget(std::uint64_t max_requests, std::uint64_t max_bytes);

    // May a connection take a request now? One holding a ticket always may;
    // others only when there is room and nobody is in line -- the holder of
    // an unused ticket included, whose request's bytes are not counted yet.
    bool admits(bool holds_ticket) const {
        return holds_ticket || (has_room() && waiters_.empty() && tickets_ == 0);
    }
    void take_request(bool with_ticket);
    void take_bytes(std::uint64_t n);
    // Gives back one request and its bytes; the room goes to the line first.
    void give(std::uint64_t bytes);
    // A ticket its holder will not use (it closed): passed on down the line.
    void return_ticket();
    // Joins the end of the line (a waiter that died meanwhile is skipped).
    void wait(std::weak_ptr<Waiter> waiter);

    Stats stats() const;

private:
    bool has_room() const { return requests_ + tickets_ < max_requests_ && bytes_ < max_bytes_; }
    // Hands out tickets to the head of the line while there is room.
    void serve_line();

    std::uint64_t max_requests_;
    std::uint64_t max_bytes_;
    std::uint64_t requests_ = 0;
    std::uint64_t bytes_ = 0;
    std::uint64_t peak_requests_ = 0;
    std::uint64_t peak_bytes_ = 0;
    std::uint64_t waits_ = 0;
    std::uint64_t tickets_ = 0;
    std::deque<std::weak_ptr<Waiter>> waiters_;
};

}   // namespace nbdsched::daemon
