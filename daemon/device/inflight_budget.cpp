#include "daemon/device/inflight_budget.hpp"

#include <algorithm>

#include "daemon/device/steady_clock.hpp"
#include "sched/pool_share.hpp"

namespace nbdsched::daemon {

InflightBudget::InflightBudget(Options options)
    : max_requests_(options.max_requests),
      max_bytes_(options.max_bytes),
      fair_share_(options.fair_share),
      share_idle_(options.share_idle),
      clock_(std::move(options.clock)) {}

InflightBudget::InflightBudget(std::uint64_t max_requests, std::uint64_t max_bytes)
    : InflightBudget([&] {
          Options o;
          o.max_requests = max_requests;
          o.max_bytes = max_bytes;
          return o;
      }()) {}

void InflightBudget::set_weight(sched::GroupId group, unsigned weight) {
    groups_[group].weight = std::max(weight, 1u);
    serve_line();   // a heavier group may be under its share now
}

Nanos InflightBudget::now() const {
    return clock_ ? clock_() : steady_now();
}

bool InflightBudget::using_device(const Group& g, Nanos now) const {
    return sched::uses_pool(g.held > 0 || !g.line.empty(), g.ever_used, g.idle_since, now, share_idle_);
}

[[gnu::hot]] std::uint64_t InflightBudget::weight_sum(sched::GroupId id, Nanos now, std::uint64_t& weight) const {
    auto it = groups_.find(id);
    weight = it == groups_.end() ? 100 : it->second.weight;
    std::uint64_t wsum = weight;   // the asking group counts even before it uses the device
    for (const auto& [other, g] : groups_)
        if (other != id && using_device(g, now)) wsum += g.weight;
    return wsum;
}

// At least one slot and one byte: a group holding none is admitted whatever
// the size of its next request, so it always makes progress.
[[gnu::hot]] InflightBudget::Shares InflightBudget::shares_of(sched::GroupId id, Nanos now) const {
    if (!fair_share_) return {max_requests_, max_bytes_};
    std::uint64_t weight = 0;
    const auto wsum = weight_sum(id, now, weight);
    return {sched::weighted_share(max_requests_, weight, wsum), sched::weighted_share(max_bytes_, weight, wsum)};
}

[[gnu::hot]] bool InflightBudget::eligible(sched::GroupId id, const Group& g, Nanos now) const {
    if (!fair_share_ && !has_room()) return false;
    const auto shares = shares_of(id, now);   // one pass over the groups for both shares
    return g.held < shares.requests && g.bytes < shares.bytes;
}

std::uint64_t InflightBudget::share(sched::GroupId group) const { return shares_of(group, now()).requests; }

std::uint64_t InflightBudget::byte_share(sched::GroupId group) const { return shares_of(group, now()).bytes; }

std::uint64_t InflightBudget::held_bytes(sched::GroupId group) const {
    auto it = groups_.find(group);
    return it == groups_.end() ? 0 : it->second.bytes;
}

std::uint64_t InflightBudget::held(sched::GroupId group) const {
    auto it = groups_.find(group);
    return it == groups_.end() ? 0 : it->second.held;
}

[[gnu::hot]] bool InflightBudget::someone_eligible_waits(Nanos now) const {
    for (const auto& [id, g] : groups_)
        if (!g.line.empty() && eligible(id, g, now)) return true;
    return false;
}

// Asked before every request is parsed. The time only tells whether other
// groups use the device (using_device), so a group alone reads no clock.
[[gnu::hot]] bool InflightBudget::admits(sched::GroupId group, bool holds_ticket) const {
    if (holds_ticket) return true;
    if (tickets_ != 0) return false;
    auto it = groups_.find(group);
    if (it != groups_.end() && !it->second.line.empty()) return false;
    const bool alone = groups_.size() == (it == groups_.end() ? 0 : 1);
    const auto t = alone ? Nanos{0} : now();
    if (it == groups_.end()) return eligible(group, Group{}, t) && !someone_eligible_waits(t);
    return eligible(group, it->second, t) && !someone_eligible_waits(t);
}

[[gnu::hot]] void InflightBudget::take_request(sched::GroupId group, bool with_ticket) {
    auto& g = groups_[group];
    if (with_ticket)
        --tickets_;   // the ticket's slot is the group's already
    else
        ++g.held;
    g.ever_used = true;
    ++requests_;
    peak_requests_ = std::max(peak_requests_, requests_);
}

[[gnu::hot]] void InflightBudget::take_bytes(sched::GroupId group, std::uint64_t n) {
    groups_[group].bytes += n;
    bytes_ += n;
    peak_bytes_ = std::max(peak_bytes_, bytes_);
    serve_line();   // the last ticket's request is now fully counted
}

[[gnu::hot]] void InflightBudget::release_slot(Group& g) {
    --g.held;
    if (g.held == 0 && g.line.empty()) g.idle_since = now();
}

[[gnu::hot]] void InflightBudget::give(sched::GroupId group, std::uint64_t bytes) {
    --requests_;
    bytes_ -= bytes;
    auto& g = groups_[group];
    g.bytes -= bytes;
    release_slot(g);
    serve_line();
}

void InflightBudget::return_ticket(sched::GroupId group) {
    --tickets_;
    release_slot(groups_[group]);
    serve_line();
}

void InflightBudget::wait(sched::GroupId group, std::weak_ptr<Waiter> waiter) {
    ++waits_;
    auto& g = groups_[group];
    g.ever_used = true;
    g.line.push_back({next_seq_++, std::move(waiter)});
    // There may be room already: the line only forms behind a dead waiter,
    // a ticket still unused or the group's share, and nothing else would
    // serve it then.
    serve_line();
}

InflightBudget::Group* InflightBudget::next_in_line(Nanos now, sched::GroupId& id) {
    Group* best = nullptr;
    for (auto& [gid, g] : groups_) {
        while (!g.line.empty() && g.line.front().waiter.expired()) g.line.pop_front();
        if (g.line.empty() || !eligible(gid, g, now)) continue;
        if (!best || g.line.front().seq < best->line.front().seq) {
            best = &g;
            id = gid;
        }
    }
    return best;
}

[[gnu::hot]] bool InflightBudget::anyone_in_line() const {
    return std::any_of(groups_.begin(), groups_.end(), [](const auto& entry) { return !entry.second.line.empty(); });
}

// Only connections holding a complete request join the line, so a ticket is
// used as soon as its holder runs (or returned if it closes): room is never
// parked with a connection that has nothing to send. One ticket at a time:
// a request's bytes are known only once it is taken, so the next ticket
// waits for them (take_bytes) or for the next reply (give); otherwise a
// burst of tickets could overrun the byte budget by many requests. A group
// over its share waits for its own replies (give), so it is never stranded.
// With fair_share a group under its shares is served even when the pool is
// full (see the header); without, only while the pool has room. It runs as
// every request is taken and given back: with nobody in line (the usual
// case) it reads no clock.
[[gnu::hot]] void InflightBudget::serve_line() {
    while (tickets_ == 0 && anyone_in_line()) {
        sched::GroupId id = 0;
        Group* g = next_in_line(now(), id);
        if (!g) return;
        auto head = g->line.front().waiter.lock();
        g->line.pop_front();
        if (!head) continue;   // died since next_in_line looked
        ++tickets_;
        ++g->held;
        head->budget_available();
    }
}

InflightBudget::Stats InflightBudget::stats() const {
    return {requests_, bytes_, peak_requests_, peak_bytes_, waits_, tickets_};
}

}   // namespace nbdsched::daemon
