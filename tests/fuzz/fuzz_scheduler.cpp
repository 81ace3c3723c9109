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
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "sched/scheduler.hpp"
#include "tests/fuzz/check.hpp"
#include "tests/fuzz/input.hpp"
#include "tests/fuzz/scheduler_harness.hpp"

namespace {

using namespace nbdsched;
using namespace nbdsched::sched;
using namespace std::chrono_literals;

constexpr std::array<const char*, 3> policies = {"none", "cfq", "bfq"};
constexpr std::array<const char*, 12> values = {"0", "1", "2", "4", "8", "100", "1000", "auto",
                                                "8ms", "125ms", "0ms", "1s"};
constexpr unsigned queues = 8;
constexpr unsigned max_events = 4000;

class Driver : public fuzz::SchedulerHarness {
public:
    Driver(std::unique_ptr<Scheduler> s, unsigned depth) : SchedulerHarness(std::move(s), depth) {}

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
    void tunable(std::size_t name, std::size_t value) {
        auto names = s_->tunable_names();
        if (names.empty()) return;
        const std::string& n = names[name % names.size()];
        (void)s_->set_tunable(n, values[value % values.size()], now_);
        FUZZ_CHECK(s_->get_tunable(n).has_value());
        after_event();
    }
    // Everything reaches the device within an hour of virtual time, and the
    // scheduler's own counts agree.
    void finish() {
        SchedulerHarness::finish(3600s);
        auto st = s_->stats(now_);
        FUZZ_CHECK(st.device.dispatched == next_id_ - 1);
        FUZZ_CHECK(st.device.completed == next_id_ - 1);
    }

private:
    void dispatched(const Request& r) override {
        FUZZ_CHECK(waiting_.erase(r.id) == 1);   // submitted, not yet dispatched
    }
    std::size_t waiting() const override { return waiting_.size(); }

    std::map<QueueId, GroupId> open_;
    std::set<RequestId> waiting_;
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
