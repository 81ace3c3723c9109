// A device's in-flight limits (limits.max_inflight_per_device and
// max_inflight_bytes_per_device): requests read from any connection of the
// device but not yet answered, and their data bytes. Connections charge it
// as they read a request and give it back as the reply leaves. Event loop
// thread only.
//
// Admission is first come, first served within a group, like the kernel's
// request pool (nr_requests): a connection holding a complete request that
// finds no room waits in line here, and room that appears goes to the line
// as a ticket (one request) that nobody else can take. Without that,
// whichever connection happened to read first would take every freed slot,
// and the scheduler would never see the others' requests.
//
// Across groups the pool is shared by weight (fair_share, the rule in
// sched/pool_share.hpp, which the simulator's `line` pool shares), the analogue of
// BFQ's bfqq_request_over_limit() (Linux 5.17+, "bfq: Limit number of
// requests consumed by each cgroup"): while several groups use the device,
// a group may hold at most max_requests * weight / (sum of the weights of
// the groups using it) slots, at least one, and as much of max_bytes, at
// least one byte (so one request of any size). A group over its share waits
// even when the pool has room, so a flooding group leaves the others their
// share; a group alone may use the whole pool. A group under both of its
// shares is admitted even when the pool is full: what fills it is then
// room other groups took beyond their shares (while alone, or before this
// group came), and they may hold it indefinitely (a client that stalls in
// the middle of a WRITE payload, or never reads its replies); so a tenant
// can block only itself, and the pool's total may pass its limit by what
// the others held beyond their shares, until they give it back. Freed room
// goes to the longest waiter among the groups under their share, so a
// connection of a group below its share never waits behind one of a group
// over it. A group
// counts as using the device while it holds slots or waits, and for
// `share_idle` after its last slot came back: a qd1 reader holds nothing
// between a reply and its next request, and would otherwise find the pool
// refilled by the flooder each time (BFQ keeps such a queue's group on the
// service tree while it idles for it, for the same reason).
//
// Like the per-connection limits, fullness is checked before a request is
// taken, so one request may take the bytes over the limit: a request larger
// than the whole byte budget still passes when the device is otherwise idle.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>

#include "common/reused_fifo.hpp"
#include "common/units.hpp"
#include "sched/pool_share.hpp"
#include "sched/request.hpp"

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

    struct Options {
        std::uint64_t max_requests = UINT64_MAX;
        std::uint64_t max_bytes = UINT64_MAX;
        bool fair_share = true;                         // false: one first-come-first-served line for all groups
        Nanos share_idle = sched::default_share_idle;   // see sched/pool_share.hpp
        std::function<Nanos()> clock;                   // unset: steady_clock
    };

    explicit InflightBudget(Options options);
    InflightBudget(std::uint64_t max_requests, std::uint64_t max_bytes);   // the other options at their defaults

    // A group's weight (1..1000); a group never set weighs 100, the default group's weight.
    void set_weight(sched::GroupId group, unsigned weight);

    // May a connection of `group` take a request now? One holding a ticket
    // always may; others only when there is room, no ticket is unused (its
    // request's bytes are not counted yet), their group is under its share
    // and nobody is in line ahead of them: of their own group, or of a group
    // under its share.
    bool admits(sched::GroupId group, bool holds_ticket) const;
    void take_request(sched::GroupId group, bool with_ticket);
    void take_bytes(sched::GroupId group, std::uint64_t n);
    // Gives back one request and its bytes; the room goes to the line first.
    void give(sched::GroupId group, std::uint64_t bytes);
    // A ticket its holder will not use (it closed): passed on down the line.
    void return_ticket(sched::GroupId group);
    // Joins the end of its group's line (a waiter that died meanwhile is skipped).
    void wait(sched::GroupId group, std::weak_ptr<Waiter> waiter);

    // The most slots `group` may hold now (the whole pool when it is alone).
    std::uint64_t share(sched::GroupId group) const;
    // Slots the group holds: its requests and its unused ticket.
    std::uint64_t held(sched::GroupId group) const;
    // The most bytes `group` may hold now, and the bytes it holds.
    std::uint64_t byte_share(sched::GroupId group) const;
    std::uint64_t held_bytes(sched::GroupId group) const;

    Stats stats() const;

private:
    struct Line {
        std::uint64_t seq;   // arrival order across all groups
        std::weak_ptr<Waiter> waiter;
    };
    struct Group {
        unsigned weight = 100;
        std::uint64_t held = 0;
        std::uint64_t bytes = 0;
        common::ReusedFifo<Line> line;   // nothing allocated per wait once it has held its most
        Nanos idle_since{};              // when held and line last became empty
        bool ever_used = false;
    };

    bool has_room() const { return requests_ + tickets_ < max_requests_ && bytes_ < max_bytes_; }
    Nanos now() const;
    bool using_device(const Group& g, Nanos now) const;
    // The group's weight and the sum of the weights of the groups using the
    // device (the group's own counted even before it uses it).
    std::uint64_t weight_sum(sched::GroupId id, Nanos now, std::uint64_t& weight) const;
    struct Shares {
        std::uint64_t requests;
        std::uint64_t bytes;
    };
    // The most slots and bytes the group may hold at `now`.
    Shares shares_of(sched::GroupId id, Nanos now) const;
    // May the group take one more request: under both of its shares, and
    // without fair_share with room in the pool.
    bool eligible(sched::GroupId id, const Group& g, Nanos now) const;
    // The group whose line head came first among those under their share; nullptr: none.
    Group* next_in_line(Nanos now, sched::GroupId& id);
    bool someone_eligible_waits(Nanos now) const;
    bool anyone_in_line() const;
    void release_slot(Group& g);
    // Hands out tickets to the line while there is room.
    void serve_line();

    std::uint64_t max_requests_;
    std::uint64_t max_bytes_;
    bool fair_share_;
    Nanos share_idle_;
    std::function<Nanos()> clock_;
    std::uint64_t requests_ = 0;
    std::uint64_t bytes_ = 0;
    std::uint64_t peak_requests_ = 0;
    std::uint64_t peak_bytes_ = 0;
    std::uint64_t waits_ = 0;
    std::uint64_t tickets_ = 0;
    std::uint64_t next_seq_ = 0;
    std::map<sched::GroupId, Group> groups_;   // a handful: one per tenant
};

}   // namespace nbdsched::daemon
