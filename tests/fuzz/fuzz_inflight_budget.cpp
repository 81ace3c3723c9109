// Fuzz target: a device's in-flight budget (daemon/device/inflight_budget.hpp)
// driven the way connections drive it, by a sequence of events decoded from
// the input: a connection of one of four groups has a request (taken at
// once when admitted, else it waits in line), runs with the ticket it was
// woken with, gets a reply, closes; weights change; time passes. Checked
// after every event:
//   - the budget's totals match what the connections hold: requests, bytes,
//     tickets, and each group's held slots and bytes;
//   - a ticket goes only to a connection waiting in line, once per wait
//     (nothing is handed out or given back twice);
//   - a group under both of its shares, with nobody eligible ahead of it and
//     no ticket out, is admitted, at the latest as it joins the line (the
//     header's promise);
//   - no group holds more requests than the pool, so with n groups the
//     pool holds at most n times its limit (docs/configuration.md: what
//     the others took while their shares were larger stays theirs);
// and at the end, with no new requests, replying to everything and running
// every ticket drains the line and brings every total back to zero.
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "daemon/device/inflight_budget.hpp"
#include "tests/fuzz/check.hpp"
#include "tests/fuzz/input.hpp"

namespace {

using namespace nbdsched;
using namespace nbdsched::daemon;

constexpr unsigned connections = 8;
constexpr unsigned groups = 4;
constexpr unsigned max_events = 2000;

struct Conn;

struct Waiter final : InflightBudget::Waiter {
    Conn* conn;
    explicit Waiter(Conn* c) : conn(c) {}
    void budget_available() override;
};

struct Conn {
    sched::GroupId group = 0;
    bool open = true;
    bool waiting = false;   // in line with a complete request
    bool ticket = false;
    std::uint64_t pending_bytes = 0;
    std::shared_ptr<Waiter> waiter;
    std::deque<std::uint64_t> inflight;   // bytes of each request taken
};

void Waiter::budget_available() {
    FUZZ_CHECK(conn->open && conn->waiting && !conn->ticket);   // once per wait, only to a waiter
    conn->ticket = true;
}

class Driver {
public:
    Driver(std::uint64_t max_requests, std::uint64_t max_bytes, bool fair) : max_requests_(max_requests) {
        InflightBudget::Options o;
        o.max_requests = max_requests;
        o.max_bytes = max_bytes;
        o.fair_share = fair;
        o.clock = [this] { return now_; };
        fair_ = fair;
        budget_ = std::make_unique<InflightBudget>(std::move(o));
        for (unsigned i = 0; i < connections; ++i) conns_[i].group = i % groups;
    }

    void request(unsigned c, std::uint64_t bytes) {
        Conn& k = conns_[c];
        if (!k.open || k.waiting) return;
        const auto g = k.group;
        const auto st = budget_->stats();
        const bool admitted = budget_->admits(g, false);
        // Under both shares, nobody eligible ahead: admitted now, or (a
        // closed connection's place still in line) woken on joining it.
        const bool owed = fair_ && st.tickets == 0 && !line_ahead(g) && budget_->held(g) < budget_->share(g) &&
                          budget_->held_bytes(g) < budget_->byte_share(g);
        if (admitted) {
            budget_->take_request(g, false);
            take(k, bytes);
        } else {
            k.waiting = true;
            k.pending_bytes = bytes;
            if (!k.waiter) k.waiter = std::make_shared<Waiter>(&k);
            budget_->wait(g, k.waiter);
            if (owed) FUZZ_CHECK(k.ticket);
        }
        check();
    }
    void run(unsigned c) {
        Conn& k = conns_[c];
        if (!k.ticket) return;
        FUZZ_CHECK(budget_->admits(k.group, true));
        budget_->take_request(k.group, true);
        k.ticket = false;
        k.waiting = false;
        take(k, k.pending_bytes);
        check();
    }
    void reply(unsigned c) {
        Conn& k = conns_[c];
        if (k.inflight.empty()) return;
        const auto bytes = k.inflight.front();
        k.inflight.pop_front();
        budget_->give(k.group, bytes);
        check();
    }
    // The connection goes; its requests still get their replies (given back
    // as they are written), its ticket goes back, its place in line lapses.
    void close(unsigned c) {
        Conn& k = conns_[c];
        if (!k.open) return;
        k.open = false;
        k.waiter.reset();
        if (k.ticket) {
            k.ticket = false;
            k.waiting = false;
            budget_->return_ticket(k.group);
        }
        k.waiting = false;
        check();
    }
    void reopen(unsigned c, sched::GroupId g) {
        Conn& k = conns_[c];
        if (k.open || !k.inflight.empty()) return;
        k = Conn{};
        k.group = g;
        check();
    }
    void weight(sched::GroupId g, unsigned w) {
        budget_->set_weight(g, w);
        check();
    }
    void advance(Nanos by) {
        now_ += by;
        check();
    }
    void finish() {
        for (unsigned round = 0; round < 100000; ++round) {
            bool any = false;
            for (unsigned c = 0; c < connections; ++c) {
                if (conns_[c].ticket) {
                    run(c);
                    any = true;
                }
                if (!conns_[c].inflight.empty()) {
                    reply(c);
                    any = true;
                }
            }
            if (!any) break;
        }
        for (const auto& k : conns_) FUZZ_CHECK(!(k.open && k.waiting));   // nobody left in line
        const auto st = budget_->stats();
        FUZZ_CHECK(st.requests == 0 && st.bytes == 0 && st.tickets == 0);
        for (sched::GroupId g = 0; g < groups; ++g) FUZZ_CHECK(budget_->held(g) == 0 && budget_->held_bytes(g) == 0);
    }

private:
    void take(Conn& k, std::uint64_t bytes) {
        budget_->take_bytes(k.group, bytes);
        k.inflight.push_back(bytes);
    }
    // Someone of an eligible group in line (before `g`'s request): the
    // budget serves the line first.
    bool line_ahead(sched::GroupId g) const {
        for (const auto& k : conns_)
            if (k.open && k.waiting && !k.ticket &&
                (k.group == g || (budget_->held(k.group) < budget_->share(k.group) &&
                                  budget_->held_bytes(k.group) < budget_->byte_share(k.group))))
                return true;
        return false;
    }
    void check() const {
        std::uint64_t requests = 0, bytes = 0, tickets = 0;
        std::uint64_t held[groups] = {}, held_bytes[groups] = {};
        for (const auto& k : conns_) {
            requests += k.inflight.size();
            held[k.group] += k.inflight.size() + (k.ticket ? 1 : 0);
            for (auto b : k.inflight) {
                bytes += b;
                held_bytes[k.group] += b;
            }
            tickets += k.ticket ? 1 : 0;
        }
        const auto st = budget_->stats();
        FUZZ_CHECK(st.requests == requests);
        FUZZ_CHECK(st.bytes == bytes);
        FUZZ_CHECK(st.tickets == tickets);
        FUZZ_CHECK(tickets <= 1);   // one ticket at a time
        for (sched::GroupId g = 0; g < groups; ++g) {
            FUZZ_CHECK(budget_->held(g) == held[g]);
            FUZZ_CHECK(budget_->held_bytes(g) == held_bytes[g]);
            FUZZ_CHECK(held[g] <= max_requests_);   // a share is never more than the pool
        }
        FUZZ_CHECK(requests + tickets <= groups * max_requests_);
    }

    std::unique_ptr<InflightBudget> budget_;
    std::uint64_t max_requests_;
    bool fair_ = true;
    Nanos now_{std::chrono::seconds(1)};
    Conn conns_[connections];
};

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    nbdsched::fuzz::Input in(data, size);
    const std::uint64_t max_requests = 1 + in.below(16);
    const std::uint64_t max_bytes = in.flag() ? UINT64_MAX : 4096 * (1 + std::uint64_t(in.below(64)));
    Driver d(max_requests, max_bytes, !in.flag());
    for (unsigned n = 0; n < max_events && !in.empty(); ++n) {
        const unsigned c = in.below(connections);
        switch (in.below(10)) {
        case 0:
        case 1:
        case 2: d.request(c, 512 * std::uint64_t(in.below(2049))); break;   // up to 1 MiB, 0 for a flush
        case 3:
        case 4: d.run(c); break;
        case 5:
        case 6: d.reply(c); break;
        case 7:
            if (in.flag())
                d.close(c);
            else
                d.reopen(c, in.below(groups));
            break;
        case 8: d.weight(in.below(groups), 1 + in.below(1000)); break;
        default: d.advance(std::chrono::microseconds(in.u16()) * 4); break;   // up to 262 ms
        }
    }
    d.finish();
    return 0;
}
