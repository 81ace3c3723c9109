#include "tools/sim/admission_line.hpp"

#include "sched/pool_share.hpp"

namespace nbdsched::sim {

AdmissionLine::AdmissionLine(unsigned nr_requests, bool fair_share, Nanos share_idle, std::size_t jobs)
    : nr_requests_(nr_requests), fair_share_(fair_share), share_idle_(share_idle), job_group_(jobs), ticket_(jobs) {}

void AdmissionLine::set_group(std::size_t job, sched::GroupId group, unsigned weight) {
    job_group_[job] = group;
    groups_[group].weight = weight == 0 ? 100 : weight;
}

std::uint64_t AdmissionLine::share(sched::GroupId id, Nanos now) const {
    if (!fair_share_) return nr_requests_;
    auto it = groups_.find(id);
    std::uint64_t weight = it == groups_.end() ? 100 : it->second.weight;
    std::uint64_t wsum = weight;   // the asking group counts even before it uses the pool
    for (const auto& [other, g] : groups_)
        if (other != id && sched::uses_pool(g.held > 0 || !g.line.empty(), g.ever_used, g.idle_since, now, share_idle_))
            wsum += g.weight;
    return sched::weighted_share(nr_requests_, weight, wsum);
}

unsigned AdmissionLine::held(sched::GroupId group) const {
    auto it = groups_.find(group);
    return it == groups_.end() ? 0 : it->second.held;
}

std::size_t AdmissionLine::sleeping() const {
    std::size_t n = 0;
    for (const auto& [id, g] : groups_) n += g.line.size();
    return n;
}

bool AdmissionLine::eligible(sched::GroupId id, const Group& g, Nanos now) const {
    if (!fair_share_ && count_ >= nr_requests_) return false;
    return g.held < share(id, now);
}

bool AdmissionLine::someone_eligible_waits(Nanos now) const {
    for (const auto& [id, g] : groups_)
        if (!g.line.empty() && eligible(id, g, now)) return true;
    return false;
}

bool AdmissionLine::get(std::size_t job, Nanos now) {
    if (ticket_[job]) {   // the slot is counted already
        ticket_[job] = false;
        return true;
    }
    const sched::GroupId id = job_group_[job];
    Group& g = groups_[id];
    g.ever_used = true;
    if (g.line.empty() && eligible(id, g, now) && !someone_eligible_waits(now)) {
        ++g.held;
        ++count_;
        return true;
    }
    g.line.push_back({next_seq_++, job});
    ++sleeps_;
    serve(now);   // a share may have grown since room last came back (share_idle ran out)
    return false;
}

void AdmissionLine::put(std::size_t job, Nanos now) {
    Group& g = group_of(job);
    if (count_ > 0) --count_;
    if (g.held > 0) --g.held;
    if (g.held == 0 && g.line.empty()) g.idle_since = now;
    serve(now);
}

void AdmissionLine::serve(Nanos now) {
    for (;;) {
        Group* best = nullptr;
        for (auto& [id, g] : groups_)
            if (!g.line.empty() && eligible(id, g, now) && (!best || g.line.front().seq < best->line.front().seq))
                best = &g;
        if (!best) return;
        std::size_t job = best->line.front().job;
        best->line.pop_front();
        ++best->held;
        ++count_;
        ticket_[job] = true;
        woken_.push_back(job);
    }
}

std::vector<std::size_t> AdmissionLine::woken() {
    std::vector<std::size_t> out;
    out.swap(woken_);
    return out;
}

}   // namespace nbdsched::sim
