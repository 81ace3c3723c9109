// Fuzz target: the QoS layer's token buckets (sched/qos/bucket.hpp,
// sched/qos/qos_scheduler.hpp) as a property: a QosScheduler over `none`,
// `cfq` or `bfq` with one group under a limit (iops, bps or both, and a
// burst), one with a reservation and one with neither, driven by an event
// sequence decoded from the input the way the device loop drives it (drain
// dispatch() after every event, follow next_wakeup()); the limit may be
// changed or removed on the way. Checked:
//   - the limit holds (docs/configuration.md, `limit`): of the requests
//     submitted since the limit was last set, the group gets at most the burst (rate x burst, at least one
//     request or 4 KiB) plus the rate times the time passed, in requests and
//     in bytes; bytes may run over by one request, which a full bucket lets
//     through whatever its size (a TRIM or WRITE_ZEROES costs 512 bytes);
//   - every request is dispatched once, in_flight() stays within the
//     device's depth, queued() matches, and a wakeup is never in the past;
//   - nothing is stuck: at the end, with no new work, completing everything
//     and following the wakeups dispatches every request in bounded time.
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "sched/qos/qos_scheduler.hpp"
#include "sched/scheduler.hpp"
#include "tests/fuzz/check.hpp"
#include "tests/fuzz/input.hpp"
#include "tests/fuzz/scheduler_harness.hpp"

namespace {

using namespace nbdsched;
using namespace nbdsched::sched;
using namespace std::chrono_literals;

constexpr std::array<const char*, 3> policies = {"none", "cfq", "bfq"};
constexpr GroupId limited = 0, reserved = 1;
constexpr unsigned queues = 6;   // queue q is in group q % 3
constexpr unsigned max_events = 1000;

double seconds(Nanos d) { return std::chrono::duration<double>(d).count(); }

class Driver : public fuzz::SchedulerHarness {
public:
    // The harness owns the scheduler; qos_ keeps its QoS interface at hand.
    Driver(std::unique_ptr<qos::QosScheduler> s, unsigned depth) : SchedulerHarness(nullptr, depth), qos_(s.get()) {
        s_ = std::move(s);
        for (QueueId q = 1; q <= queues; ++q) s_->open_queue(q, q % 3, now_);
    }

    void set_limit(const qos::GroupQos& q) {
        FUZZ_CHECK(qos_->set_qos(limited, q, now_).empty());
        limit_ = q.limit;
        burst_ = q.burst;
        since_ = now_;
        first_counted_ = next_id_;   // earlier ones may be past the gate already
        count_ = 0;
        bytes_ = 0;
        after_event();
    }
    void set_reserve(const qos::GroupQos& q) {
        FUZZ_CHECK(qos_->set_qos(reserved, q, now_).empty());
        after_event();
    }
    void submit(QueueId q, Op op, std::uint64_t length) {
        Request r;
        r.id = next_id_++;
        r.queue = q;
        r.group = q % 3;
        r.op = op;
        r.offset = 0;
        r.length = op == Op::flush ? 0 : length;
        r.sync = true;
        r.arrival = now_;
        waiting_[r.id] = r;
        s_->submit(r, now_);
        after_event();
    }
    // The slowest limit (1 IOPS, 4 KiB/s) with up to 1000 requests of 1 MiB.
    void finish() { SchedulerHarness::finish(1000000s); }

private:
    // The most the limit lets through since it was set (qos_settings.cpp
    // sizes the buckets; a relative slack for the doubles).
    void check_limit(const Request& r) {
        if (r.group != limited || r.id < first_counted_) return;
        ++count_;
        const bool no_data = r.op == Op::trim || r.op == Op::write_zeroes;
        const std::uint64_t cost = no_data ? std::min<std::uint64_t>(r.length, 512) : r.length;
        bytes_ += cost;
        biggest_ = std::max(biggest_, cost);
        const double t = seconds(now_ - since_), b = seconds(burst_);
        if (limit_.iops) {
            const double iops = double(limit_.iops);
            FUZZ_CHECK(double(count_) <= (std::max(1.0, iops * b) + iops * t) * (1 + 1e-9) + 1e-6);
        }
        if (limit_.bps) {
            const double bps = double(limit_.bps);
            FUZZ_CHECK(double(bytes_) <= (std::max(4096.0, bps * b) + bps * t) * (1 + 1e-9) + double(biggest_));
        }
    }
    void dispatched(const Request& r) override {
        auto it = waiting_.find(r.id);
        FUZZ_CHECK(it != waiting_.end());
        check_limit(it->second);
        waiting_.erase(it);
    }
    std::size_t waiting() const override { return waiting_.size(); }

    qos::QosScheduler* qos_;
    std::map<RequestId, Request> waiting_;
    qos::Rate limit_;
    Nanos burst_{};
    Time since_{};
    RequestId first_counted_ = 1;
    std::uint64_t count_ = 0, bytes_ = 0, biggest_ = 0;
};

// A limit in the configuration's range (sched/qos/spec.hpp): iops 1..,
// bps 4 KiB.., burst 1 ms..10 s; either rate may be off.
qos::GroupQos limit_from(nbdsched::fuzz::Input& in) {
    qos::GroupQos q;
    const unsigned which = in.below(4);   // 0: off, 1: iops, 2: bps, 3: both
    if (which & 1) q.limit.iops = 1 + in.below(5000);
    if (which & 2) q.limit.bps = 4096 + std::uint64_t(in.below(1u << 16)) * 1024;
    q.burst = std::chrono::milliseconds(1 + in.below(10000));
    return q;
}

}   // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    nbdsched::fuzz::Input in(data, size);
    DeviceTraits traits;
    traits.rotational = in.flag();
    traits.max_depth = 1 + in.below(32);
    std::string error;
    auto inner = make_scheduler(policies[in.below(policies.size())], traits, {}, error);
    FUZZ_CHECK(inner != nullptr);
    Driver d(std::make_unique<qos::QosScheduler>(std::move(inner), traits), traits.max_depth);
    d.set_limit(limit_from(in));
    for (unsigned n = 0; n < max_events && !in.empty(); ++n) {
        switch (in.below(12)) {
        case 0: d.set_limit(limit_from(in)); break;
        case 1: {
            qos::GroupQos q;
            if (in.flag()) q.reserve.iops = 1 + in.below(2000);
            if (in.flag()) q.reserve.bps = 4096 + std::uint64_t(in.below(1u << 14)) * 1024;
            d.set_reserve(q);
            break;
        }
        case 2:
        case 3: d.complete(in.u8()); break;
        case 4: d.advance(Nanos(in.u16()) * 1000); break;     // up to 65 ms
        case 5: d.advance(Nanos(in.u16()) * 100000); break;   // up to 6.5 s
        default: {
            const auto op = static_cast<Op>(in.below(5));
            const std::uint64_t length = 512 * (1 + std::uint64_t(in.below(2048)));
            d.submit(1 + in.below(queues), op, length);
        }
        }
    }
    d.finish();
    return 0;
}
