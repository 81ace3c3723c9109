// The devices whose lock a failed hand-over's take-back could not get
// (server_takeback.cpp), one record each: how many tries failed and when
// the next is due. Their writes fail (EROFS) until a retry gets the lock
// back. A device's delay starts at `first` when its lock is lost and
// doubles, up to `longest`, with each of its own failed tries, whatever the
// other devices' delays (a device newly lost is tried after `first` even
// while another waits `longest`). A device whose try runs has no time: the
// try's answer sets the next (failed) or ends it (back).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace nbdsched::daemon {

class LostLocks {
public:
    using Time = std::chrono::steady_clock::time_point;

    struct Lost {
        unsigned failures = 0;               // failed tries since the lock was lost, the first included
        std::chrono::milliseconds delay{};   // the wait before its next try (doubles up to `longest`)
        std::optional<Time> due;             // nullopt: a try runs
    };

    LostLocks(std::chrono::milliseconds first, std::chrono::milliseconds longest) : first_(first), longest_(longest) {}

    // A try of `device` failed at `now`, or its lock was lost then: its
    // next try after `first` if it was not lost before, else after twice
    // its last delay (at most `longest`). Its record.
    const Lost& failed(const std::string& device, Time now);
    // Its lock is back: forgotten, a next loss starts at `first` again.
    // The tries that had failed; 0: its lock was not lost.
    unsigned back(const std::string& device);
    // A try of `device` begins (whoever began it): not due until its answer.
    void started(const std::string& device);
    // The devices due at `now` (none with a try running), in name order.
    std::vector<std::string> due(Time now) const;
    // When the first device is due; nullopt: none waits.
    std::optional<Time> next() const;
    // Its record; nullptr: its lock is not lost.
    const Lost* find(const std::string& device) const;
    bool lost(const std::string& device) const { return entries_.count(device) != 0; }
    bool empty() const { return entries_.empty(); }
    // Every device whose lock is lost, in name order.
    const std::map<std::string, Lost>& all() const { return entries_; }

private:
    std::chrono::milliseconds first_;
    std::chrono::milliseconds longest_;
    std::map<std::string, Lost> entries_;
};

}   // namespace nbdsched::daemon
