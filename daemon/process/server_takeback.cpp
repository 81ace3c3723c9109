// The old process's locks after a failed hand-over (docs/restart.md): taken
// back on a thread per device (rbd_lock_acquire waits for the cluster as a
// release does), loop 0 serving on. A device whose take-back failed has
// lost its lock: its writes fail (EROFS) while it is retried with a
// backoff of its own (lost_locks.hpp), until the lock is back or the
// daemon stops. Between two tries no
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

bool Server::listed(const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
}

// One thread per device (a device not in `names` has nothing to do): loop 0
// serves on meanwhile; a device's connections wait until its lock is back
// (unpark_held), since its writes fail (EROFS) until then. Every device,
// even after one failed: the old process serving on wants all it can get.
void Server::take_back_locks(const std::vector<std::string>& names, bool retry) {
    if (names.empty()) return;
    auto outcome = std::make_shared<std::map<std::string, TakeBack>>();
    for (const auto& name : names) (*outcome)[name];
    taking_back_.insert(taking_back_.end(), names.begin(), names.end());
    for (const auto& name : names) lost_locks_.started(name);   // its answer sets its next try
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
    const auto now = std::chrono::steady_clock::now();
    for (const auto& [name, result] : outcome) {
        if (!result.broke.empty())   // the failed new process, which never served
            spdlog::warn("device {}: took its lock back from {}, which this daemon blocklisted first", name, result.broke);
        if (result.error.empty()) {
            if (const unsigned failures = lost_locks_.back(name); failures != 0)
                spdlog::info("device {}: its lock is back after {} attempt(s): writable again", name, failures + 1);
            continue;
        }
        all_back = false;
        const auto& lost = lost_locks_.failed(name, now);
        if (lost.failures == 1) {   // lost now
            errors += (errors.empty() ? "" : "; ") + ("device " + name + ": " + result.error);
            continue;
        }
        std::uint64_t held_back = 0;
        if (!retake_log_.allow(steady_now(), held_back)) continue;
        if (held_back != 0)
            spdlog::warn("{} more failed take-back(s) of a lock not logged (at most {} lines per {} s)", held_back,
                         retake_log_.burst(),
                         std::chrono::duration_cast<std::chrono::seconds>(retake_log_.interval()).count());
        spdlog::warn("device {}: taking its lock back failed again (attempt {}): {}; its writes fail (EROFS) until "
                     "it is back (next try in {} ms)",
                     name, lost.failures, result.error, lost.delay.count());
    }
    unpark_held(false);
    if (!errors.empty()) {
        spdlog::error("after the failed hand-over, taking the locks back failed: {} (its writes fail, EROFS, until "
                      "it is back: tried again after {} ms, then at most every {} ms)",
                      errors, k_retake_first.count(), k_retake_longest.count());
    } else if (all_back && !retry) {
        spdlog::info("hand-over: the locks are taken back ({} device(s))", names.size());
    }
    retake_later();
}

// The next try of each device whose lock is lost, when its own delay
// (lost_locks_) has passed: the timer waits for the first one due.
void Server::retake_later() {
    retake_timer_.cancel();   // a device newly lost may be due before the one it waited for
    if (stopping_ || handing_over_) return;
    const auto next = lost_locks_.next();
    if (!next) return;
    retake_timer_.expires_at(*next);
    retake_timer_.async_wait([this](const boost::system::error_code& ec) {
        if (ec) return;
        exclusive([this] {
            if (stopping_ || handing_over_) return;
            take_back_locks(lost_locks_.due(std::chrono::steady_clock::now()), true);
            retake_later();   // those not due yet
        });
    });
}

// A hand-over begins while locks are lost: no try during it (its release
// would run beside the acquire). Once it fails, retake_later goes on.
void Server::pause_retakes() { retake_timer_.cancel(); }

// A device whose lock is lost has nothing to flush: the hand-over that
// released its lock flushed it first, and every write since failed. Its
// flush would fail too (EROFS: librbd wants the lock for it).
std::function<int(Device&)> Server::flush_job() const {
    // The threads get a copy: lost_locks_ is loop 0's, and a flush left behind runs on after it changed.
    return [lost = lost_locks_](Device& d) { return lost.lost(d.name()) ? 0 : d.flush_now(); };
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
