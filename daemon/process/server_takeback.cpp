// The old process's locks after a failed hand-over (docs/restart.md): taken
// back on a thread per device (rbd_lock_acquire waits for the cluster as a
// release does), loop 0 serving on. A device whose take-back failed has
// lost its lock: its writes fail (EROFS) while it is retried with a
// backoff, until the lock is back or the daemon stops. Between two tries no
// thread touches the device and it holds no lock, so a next hand-over may
// begin (the new process takes the lock itself: the remedy when this
// process's cluster connection cannot get it back, e.g. blocklisted); during
// a try it is refused, as a release must not run beside an acquire.
#include <algorithm>
#include <boost/asio/post.hpp>
#include <cerrno>
#include <spdlog/spdlog.h>

#include "daemon/device/steady_clock.hpp"
#include "daemon/process/server.hpp"

namespace nbdsched::daemon {

namespace {

// A cluster that answers again is noticed within a second or so; one that
// stays away costs a try (and a log line, rate-limited) every half minute.
constexpr std::chrono::milliseconds k_retake_first{1000};
constexpr std::chrono::milliseconds k_retake_longest{30000};

bool listed(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

}   // namespace

// One thread per device (a device not in `names` has nothing to do): loop 0
// serves on meanwhile; a device's connections wait until its lock is back
// (unpark_held), since its writes fail (EROFS) until then. Every device,
// even after one failed: the old process serving on wants all it can get.
void Server::take_back_locks(const std::vector<std::string>& names, bool retry) {
    if (names.empty()) return;
    auto outcome = std::make_shared<std::map<std::string, TakeBack>>();
    for (const auto& name : names) (*outcome)[name];
    taking_back_.insert(taking_back_.end(), names.begin(), names.end());
    flushes_.start_each(
        devices_,
        [outcome](Device& d) {
            auto it = outcome->find(d.name());   // the map's shape never changes: each thread writes its own value
            if (it == outcome->end()) return 0;
            it->second.error = d.backend().acquire_exclusive(it->second.broke);
            return it->second.error.empty() ? 0 : EIO;
        },
        [this, names, outcome, retry] {
            boost::asio::post(io_, [this, names, outcome, retry] {
                exclusive([this, &names, &outcome, retry] { locks_taken_back(names, *outcome, retry); });
            });
        });
}

void Server::locks_taken_back(const std::vector<std::string>& names, const std::map<std::string, TakeBack>& outcome,
                              bool retry) {
    for (const auto& name : names)
        if (auto it = std::find(taking_back_.begin(), taking_back_.end(), name); it != taking_back_.end())
            taking_back_.erase(it);
    std::string errors;   // devices that lost their lock now
    bool all_back = true;
    for (const auto& [name, result] : outcome) {
        if (!result.broke.empty())   // the failed new process, which never served
            spdlog::warn("device {}: took its lock back from {}, which the cluster blocklists now", name, result.broke);
        auto lost = locks_lost_.find(name);
        if (result.error.empty()) {
            if (lost == locks_lost_.end()) continue;
            spdlog::info("device {}: its lock is back after {} attempt(s): writable again", name, lost->second + 1);
            locks_lost_.erase(lost);
            continue;
        }
        all_back = false;
        if (lost == locks_lost_.end()) {
            locks_lost_[name] = 1;
            errors += (errors.empty() ? "" : "; ") + ("device " + name + ": " + result.error);
            continue;
        }
        ++lost->second;
        std::uint64_t held_back = 0;
        if (!retake_log_.allow(steady_now(), held_back)) continue;
        if (held_back != 0)
            spdlog::warn("{} more failed take-back(s) of a lock not logged (at most {} lines per {} s)", held_back,
                         retake_log_.burst(),
                         std::chrono::duration_cast<std::chrono::seconds>(retake_log_.interval()).count());
        spdlog::warn("device {}: taking its lock back failed again (attempt {}): {}; its writes fail (EROFS) until "
                     "it is back",
                     name, lost->second, result.error);
    }
    unpark_held(false);
    if (!errors.empty()) {
        pause_retakes();   // a device newly lost: tried again soon, whatever the others' backoff
        retake_delay_ = {};
        spdlog::error("after the failed hand-over, taking the locks back failed: {} (its writes fail, EROFS, until "
                      "it is back: tried again after {} ms, then at most every {} ms)",
                      errors, k_retake_first.count(), k_retake_longest.count());
    } else if (all_back && !retry) {
        spdlog::info("hand-over: the locks are taken back ({} device(s))", names.size());
    }
    retake_later();
}

// The next try for every device whose lock is lost, after a delay that
// doubles from k_retake_first to k_retake_longest while tries fail.
void Server::retake_later() {
    if (locks_lost_.empty()) {
        retake_delay_ = {};
        retake_timer_.cancel();
        return;
    }
    if (stopping_ || handing_over_ || retake_pending_) return;
    retake_delay_ = retake_delay_.count() == 0 ? k_retake_first : std::min(retake_delay_ * 2, k_retake_longest);
    retake_pending_ = true;
    retake_timer_.expires_after(retake_delay_);
    retake_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        exclusive([this] {
            retake_pending_ = false;
            if (stopping_ || handing_over_) return;
            std::vector<std::string> names;
            for (const auto& [name, attempts] : locks_lost_)
                if (!listed(taking_back_, name)) names.push_back(name);   // one already running answers for it
            take_back_locks(names, true);
        });
    });
}

// A hand-over begins while locks are lost: no try during it (its release
// would run beside the acquire). Once it fails, retake_later goes on.
void Server::pause_retakes() {
    retake_pending_ = false;
    retake_timer_.cancel();
}

// A device whose lock is lost has nothing to flush: the hand-over that
// released its lock flushed it first, and every write since failed. Its
// flush would fail too (EROFS: librbd wants the lock for it).
std::function<int(Device&)> Server::flush_job() const {
    return [lost = locks_lost_](Device& d) { return lost.count(d.name()) ? 0 : d.flush_now(); };
}

void Server::unpark_held(bool timed_out) {
    if (handing_over_) return;
    if (taking_back_.empty() || stopping_) timed_out = true;
    if (timed_out) takeback_timer_.cancel();
    auto open = connections_;   // a connection may finish inside unpark()
    for (auto& [id, c] : open) {
        const Device* device = c->device();
        const bool held = device && listed(taking_back_, device->name());
        if (held && !timed_out) continue;
        if (held && !stopping_ && c->parked())
            spdlog::warn("conn {}: the lock of device {} is not back after {} ms (storage not answering): serving on, "
                         "its writes fail (EROFS) until it is",
                         id, device->name(), config_.limits.drain_timeout.count());
        c->unpark();
    }
}

}   // namespace nbdsched::daemon
