// Fuzz target: one scheduler (none, cfq or bfq, via make_scheduler) driven by
// an event sequence decoded from the input, the way the daemon's device loop
// drives it (sched/scheduler.hpp): after every event drain dispatch(), then
// honour next_wakeup(). Checked after every step:
//   - every request is dispatched exactly once, and only after its submit;
//   - dispatched requests are ones that were submitted and are still queued;
//   - in_flight() never exceeds DeviceTraits::max_depth, and queued() and
//     in_flight() match what the driver counts;
//   - complete() is only called for dispatched ids (by construction) and a
//     completed id never comes back;
//   - no time travel: after a drain at `now`, next_wakeup() is not before
//     `now`, and a wakeup at `now` itself must make progress (no spinning);
//   - no stuck request: when nothing is in flight but requests are queued,
//     a wakeup is armed; and at the end, with no new work, completing
//     everything and following the wakeups dispatches every request.
#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "sched/scheduler.hpp"
#include "tests/fuzz/check.hpp"
#include "tests/fuzz/input.hpp"

namespace {

using namespace nbdsched;
using namespace nbdsched::sched;
using namespace std::chrono_literals;

constexpr std::array<const char*, 3> policies = {"none", "cfq", "bfq"};
constexpr std::array<const char*, 12> values = {"0", "1", "2", "4", "8", "100", "1000", "auto",
                                                "8ms", "125ms", "0ms", "1s"};
constexpr unsigned queues = 8;
constexpr unsigned max_events = 4000;

class Driver {
public:
    Driver(std::unique_ptr<Scheduler> s, unsigned depth) : s_(std::move(s)), depth_(depth) {}

    void open(QueueId q, GroupId g) {
        if (open_.count(q)) return;
        s_->open_queue(q, g, now_);
        open_[q] = g;
        after_event();
    }
    void close(QueueId q) {
        if (!open_.erase(q)) return;
        s_->close_queue(q, now_);
        after_event();
    }
    void set_group(GroupId g, unsigned weight) {
        s_->set_group(g, weight);
        after_event();
    }
    void submit(QueueId q, Op op, std::uint64_t offset, std::uint64_t length, bool sync, bool fua) {
        auto it = open_.find(q);
        if (it == open_.end()) return;   // the seam: open before submit
        Request r;
        r.id = next_id_++;
        r.queue = q;
        r.group = it->second;
        r.op = op;
        r.offset = op == Op::flush ? 0 : offset;
        r.length = op == Op::flush ? 0 : length;
        r.sync = sync || fua || op == Op::read || op == Op::flush;
        r.fua = fua;
        r.arrival = now_;
        waiting_.insert(r.id);
        s_->submit(r, now_);
        after_event();
    }
    void complete(std::size_t pick) {
        if (at_device_.empty()) return;
        pick %= at_device_.size();
        RequestId id = at_device_[pick];
        at_device_.erase(at_device_.begin() + static_cast<std::ptrdiff_t>(pick));
        s_->complete(id, now_);
        ++completed_;
        after_event();
    }
    void tunable(std::size_t name, std::size_t value) {
        auto names = s_->tunable_names();
        if (names.empty()) return;
        const std::string& n = names[name % names.size()];
        (void)s_->set_tunable(n, values[value % values.size()], now_);
        FUZZ_CHECK(s_->get_tunable(n).has_value());
        after_event();
    }
    // Time passes; wakeups that come due on the way are honoured.
    void advance(Nanos by) {
        const Time target = now_ + by;
        while (auto w = s_->next_wakeup()) {
            if (*w > target) break;
            now_ = std::max(now_, *w);
            after_event();
        }
        now_ = target;
        after_event();
    }
    // No new work: the device completes everything, wakeups are followed;
    // every request must reach the device within bounded (virtual) time.
    void finish() {
        const Time deadline = now_ + 3600s;
        for (unsigned step = 0; step < 1'000'000 && (!waiting_.empty() || !at_device_.empty()); ++step) {
            if (!at_device_.empty()) {
                now_ += 100us;
                complete(0);
                continue;
            }
            auto w = s_->next_wakeup();
            FUZZ_CHECK(w.has_value());   // queued work with an idle device needs a timer
            FUZZ_CHECK(*w <= deadline);
            now_ = std::max(now_, *w);
            after_event();
        }
        FUZZ_CHECK(waiting_.empty() && at_device_.empty());
        FUZZ_CHECK(s_->queued() == 0 && s_->in_flight() == 0);
        FUZZ_CHECK(completed_ == next_id_ - 1);
        auto st = s_->stats(now_);
        FUZZ_CHECK(st.device.dispatched == next_id_ - 1);
        FUZZ_CHECK(st.device.completed == next_id_ - 1);
    }

private:
    // The driver's part after every event: drain, then check the seam.
    void after_event() {
        for (int round = 0;; ++round) {
            bool progress = drain();
            auto w = s_->next_wakeup();
            if (w) FUZZ_CHECK(*w >= now_);   // no wakeup in the past
            if (!w || *w > now_) break;
            // Asked to be called again right now: that call must achieve
            // something, or the daemon's timer would spin at one instant.
            FUZZ_CHECK(progress || round < 2);
        }
        FUZZ_CHECK(s_->queued() == waiting_.size());
        FUZZ_CHECK(s_->in_flight() == at_device_.size());
        if (!waiting_.empty() && at_device_.empty()) FUZZ_CHECK(s_->next_wakeup().has_value());
    }
    bool drain() {
        bool any = false;
        while (auto r = s_->dispatch(now_)) {
            FUZZ_CHECK(waiting_.erase(r->id) == 1);         // submitted, not yet dispatched
            FUZZ_CHECK(dispatched_.insert(r->id).second);   // exactly once
            at_device_.push_back(r->id);
            FUZZ_CHECK(s_->in_flight() <= depth_);
            FUZZ_CHECK(at_device_.size() <= depth_);
            any = true;
        }
        return any;
    }

    std::unique_ptr<Scheduler> s_;
    unsigned depth_;
    Time now_{};
    RequestId next_id_ = 1;
    std::map<QueueId, GroupId> open_;
    std::set<RequestId> waiting_;
    std::set<RequestId> dispatched_;
    std::vector<RequestId> at_device_;
    std::uint64_t completed_ = 0;
};

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    nbdsched::fuzz::Input in(data, size);
    const std::string policy = policies[in.below(policies.size())];
    DeviceTraits traits;
    traits.rotational = in.flag();
    traits.max_depth = 1 + in.below(64);
    Tunables tunables;
    if (in.flag()) {
        auto names = tunable_names(policy);
        if (!names.empty()) tunables[names[in.below(names.size())]] = values[in.below(values.size())];
    }
    std::string error;
    auto s = make_scheduler(policy, traits, tunables, error);
    if (!s) {
        FUZZ_CHECK(!error.empty());
        return 0;
    }
    Driver d(std::move(s), traits.max_depth);
    for (unsigned n = 0; n < max_events && !in.empty(); ++n) {
        switch (in.below(16)) {
        case 0: d.open(in.below(queues) + 1, in.below(4)); break;
        case 1: d.close(in.below(queues) + 1); break;
        case 2: d.set_group(in.below(4), 1 + in.below(1000)); break;
        case 3: d.tunable(in.u8(), in.u8()); break;
        case 4:
        case 5: d.complete(in.u8()); break;
        case 6: d.advance(Nanos(in.u16()) * 1000); break;   // up to 65 ms
        case 7: d.advance(Nanos(in.u8())); break;           // nanosecond steps
        default: {
            const auto op = static_cast<Op>(in.below(5));
            const std::uint64_t offset = std::uint64_t(in.u16()) * 4096 * (in.flag() ? 1 : 4096);
            const std::uint64_t length = 512 * (1 + std::uint64_t(in.below(2048)));
            d.submit(in.below(queues) + 1, op, offset, length, in.flag(), in.flag());
        }
        }
    }
    d.finish();
    return 0;
}
