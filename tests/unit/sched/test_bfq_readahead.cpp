// Two sequential readers behind the daemon's read-ahead, as bfq sees them on
// a disk (bench exp5, `read_ahead_kb: auto` on the hdd profile): each
// reader's requests are windows of two 1280 KiB prefetches, and the next
// window arrives shortly after the first piece of the current one completes
// (the client reads it from the cache and reaches the middle of the window).
// The disk serves one request at a time in submission order and accepts up
// to 32, so bfq finds that it queues commands (hw_tag 1): it then idles only
// for I/O-bound queues with a short think time.
//
// Pins the kernel's behaviour (block/bfq-iosched.c) behind exp5's bfq rows:
// one TOO_IDLE expiry with little service clears IO_bound
// (bfq_bfqq_expire), the readers' windows then alternate at the disk with a
// seek each, and IO_bound comes back only after 120 in-time activations
// (bfq_requests_within_timer): one per window here.
#include <map>

#include "test_bfq_rig.hpp"

#include "sched/bfq/scheduler.hpp"

using namespace bfqtest;

namespace {

constexpr std::uint64_t kPiece = 1280 << 10;   // the hdd profile's max_io
constexpr std::uint64_t kRegion = 128ull << 30;
constexpr Nanos kCacheRead = 700us;             // from the first piece landing to the next window
constexpr Nanos kSeek = 8700us;                 // the hdd profile's ~random access
constexpr double kRate = 170.0 * 1024 * 1024;   // bytes/s

struct Reader {
    QueueId queue = 0;
    std::uint64_t pos = 0;
    // Warm: its first two 64 KiB reads go to the disk (demand reads, which
    // the cache does not keep), then it reads what an earlier pass left in
    // the read-ahead cache for `warm_for`, with nothing at the scheduler,
    // before its read-ahead windows start.
    Nanos warm_for{};
};

struct Outcome {
    double mib_s = 0;     // over the measured span
    unsigned turns = 0;   // dispatches from another queue than the previous one
};

class ReadAheadRig {
public:
    explicit ReadAheadRig(std::vector<Reader> readers, std::string_view policy = "bfq")
        : s_(build(policy)), readers_(std::move(readers)) {
        for (std::size_t i = 0; i < readers_.size(); ++i) {
            s_->open_queue(readers_[i].queue, 0, Time{});
            if (readers_[i].warm_for.count() != 0) submit(i, 64 << 10, Kind::first_demand);
            else submit_window(i);
        }
    }

    // Runs to `until`; what was completed and how often the disk changed
    // queue from `from` on.
    Outcome run(Time from, Time until) {
        std::uint64_t bytes = 0;
        unsigned turns = 0;
        while (true) {
            while (auto r = s_->dispatch(now_)) {
                const Time start = std::max(now_, busy_until_);
                busy_until_ = start + (r->offset == head_ ? Nanos{} : kSeek) +
                              Nanos(std::int64_t(double(r->length) / kRate * 1e9));
                head_ = r->offset + r->length;
                completions_.emplace(busy_until_, r->id);
                if (now_ >= from && last_queue_ != 0 && r->queue != last_queue_) ++turns;
                last_queue_ = r->queue;
            }
            Time next = until;
            if (!completions_.empty()) next = std::min(next, completions_.begin()->first);
            if (!arrivals_.empty()) next = std::min(next, arrivals_.begin()->first);
            if (auto w = s_->next_wakeup()) next = std::min(next, std::max(*w, now_));
            if (next >= until) break;
            now_ = next;
            while (!completions_.empty() && completions_.begin()->first <= now_) {
                const RequestId id = completions_.begin()->second;
                completions_.erase(completions_.begin());
                s_->complete(id, now_);
                const auto [i, kind, length] = owner_.at(id);
                owner_.erase(id);
                if (now_ >= from) bytes += length;
                if (kind == Kind::first_demand) submit(i, 64 << 10, Kind::second_demand);
                if (kind == Kind::second_demand) arrivals_.emplace(now_ + readers_[i].warm_for, i);
                if (kind == Kind::first_piece) arrivals_.emplace(now_ + kCacheRead, i);
            }
            while (!arrivals_.empty() && arrivals_.begin()->first <= now_) {
                const std::size_t i = arrivals_.begin()->second;
                arrivals_.erase(arrivals_.begin());
                submit_window(i);
            }
        }
        now_ = until;
        const double seconds = double((until - from).count()) / 1e9;
        return {double(bytes) / (1 << 20) / seconds, turns};
    }

    bfq::BfqScheduler& bfq() { return dynamic_cast<bfq::BfqScheduler&>(*s_); }

private:
    static std::unique_ptr<Scheduler> build(std::string_view policy) {
        std::string error;
        auto s = make_scheduler(policy, DeviceTraits{true, 32}, {}, error);
        INFO(error);
        REQUIRE(s);
        return s;
    }

    enum class Kind { first_demand,
                      second_demand,
                      first_piece,
                      second_piece };

    void submit_window(std::size_t i) {
        submit(i, kPiece, Kind::first_piece);
        submit(i, kPiece, Kind::second_piece);
    }

    void submit(std::size_t i, std::uint64_t length, Kind kind) {
        Reader& r = readers_[i];
        const RequestId id = next_id_++;
        s_->submit(Request{.id = id, .queue = r.queue, .offset = r.pos, .length = length, .arrival = now_}, now_);
        r.pos += length;
        owner_[id] = {i, kind, length};
    }

    struct Owner {
        std::size_t reader;
        Kind kind;
        std::uint64_t length;
    };

    std::unique_ptr<Scheduler> s_;
    std::vector<Reader> readers_;
    std::multimap<Time, RequestId> completions_;
    std::multimap<Time, std::size_t> arrivals_;
    std::map<RequestId, Owner> owner_;
    RequestId next_id_ = 1;
    Time now_{};
    Time busy_until_{};
    std::uint64_t head_ = 0;
    QueueId last_queue_ = 0;
};

}   // namespace

TEST_CASE("bfq read-ahead readers on a disk: cold streams keep the disk for budgets of many windows") {
    ReadAheadRig rig({{.queue = 1, .pos = 0}, {.queue = 2, .pos = kRegion}});
    const Outcome o = rig.run(Time{1s}, Time{3s});
    MESSAGE("cold: " << o.mib_s << " MiB/s, " << o.turns << " turns in 2 s");
    CHECK(rig.bfq().hw_tag() == 1);
    CHECK(o.mib_s > 145);
    CHECK(o.turns < 40);
}

TEST_CASE("bfq read-ahead readers on a disk: a reader that lives on cached data first loses idling for 120 windows") {
    // Both readers re-read what a previous pass left cached (exp5's x4 cells
    // after its x2 cells, on the same regions): 10 ms of cache hits after
    // their two demand reads fire the idle timer with 256 sectors served.
    ReadAheadRig rig({{.queue = 1, .pos = 0, .warm_for = 10ms}, {.queue = 2, .pos = kRegion, .warm_for = 10ms}});
    const Outcome o = rig.run(Time{1s}, Time{3s});
    MESSAGE("warm start: " << o.mib_s << " MiB/s, " << o.turns << " turns in 2 s");
    CHECK(rig.bfq().hw_tag() == 1);
    // Not I/O-bound any more: no idling; each window is a turn of its own.
    CHECK(o.mib_s < 130);
    CHECK(o.turns > 80);
    // 120 in-time activations later both queues are I/O-bound again.
    const Outcome later = rig.run(Time{8s}, Time{10s});
    MESSAGE("after recovery: " << later.mib_s << " MiB/s, " << later.turns << " turns in 2 s");
    CHECK(later.mib_s > 150);
    CHECK(later.turns < 40);
}

TEST_CASE("bfq read-ahead readers on a disk: cfq, given the same warm start, keeps its slices") {
    // cfq's idle window follows the think-time mean and its slices are time:
    // one long wait leaves no lasting mark.
    ReadAheadRig rig({{.queue = 1, .pos = 0, .warm_for = 10ms}, {.queue = 2, .pos = kRegion, .warm_for = 10ms}}, "cfq");
    const Outcome o = rig.run(Time{1s}, Time{3s});
    MESSAGE("cfq, warm start: " << o.mib_s << " MiB/s, " << o.turns << " turns in 2 s");
    CHECK(o.mib_s > 145);
    CHECK(o.turns < 40);
}
